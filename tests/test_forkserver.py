"""The suite's fork server (tests/support/forkserver.py): a child it forks behaves as a process started with
subprocess would — its own environment, working directory, argv, streams, session and exit status — and a
command it cannot honour (another PYTHONPATH, `-c`) takes the plain subprocess path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import forkserver
from tests.support.forkserver import ForkedProcess, python_popen, python_run

SCRIPT = """
import os, sys, json
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "var": os.environ.get("FORK_TEST_VAR"),
                  "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
                  "settings_loaded": "django.conf" in sys.modules
                                     and __import__("django.conf").conf.settings.configured}))
sys.stderr.write("to stderr\\n")
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "probe.py"
    path.write_text(SCRIPT)
    return path


def test_a_forked_child_gets_its_own_argv_env_cwd_streams_and_exit_code(script: Path, tmp_path: Path) -> None:
    import json

    env = {**os.environ, "FORK_TEST_VAR": "seen"}
    result = python_run([sys.executable, str(script), "3"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 3
    assert result.stderr == "to stderr\n"
    seen = json.loads(result.stdout)
    assert seen["argv"] == [str(script), "3"] and seen["cwd"] == str(tmp_path) and seen["var"] == "seen"
    assert seen["settings_loaded"] is False  # the server never configured Django's settings
    assert forkserver.server_pid() is not None and seen["pid"] != forkserver.server_pid()


def test_a_child_in_its_own_session_can_be_killed_as_a_group(tmp_path: Path) -> None:
    log = open(tmp_path / "sleep.log", "wb")
    proc = python_popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"], cwd=tmp_path,
                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    assert isinstance(proc, ForkedProcess)
    assert os.getpgid(proc.pid) == proc.pid  # its own process group, at once: killpg cannot miss it
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert proc.poll() == -signal.SIGKILL


def test_an_uncaught_exception_exits_1_with_its_traceback(tmp_path: Path) -> None:
    script = tmp_path / "boom.py"
    script.write_text("raise ValueError('boom')\n")
    result = python_run([sys.executable, str(script)], capture_output=True, text=True)
    assert result.returncode == 1
    assert "ValueError: boom" in result.stderr


def test_what_the_server_cannot_honour_takes_the_subprocess_path(script: Path, tmp_path: Path) -> None:
    other_path = {**os.environ, "PYTHONPATH": str(tmp_path)}
    assert not forkserver._forkable([sys.executable, str(script)], other_path)
    assert not forkserver._forkable([sys.executable, "-c", "pass"], None)
    assert not forkserver._forkable(["/bin/true"], None)
    assert forkserver._forkable([sys.executable, "-m", "json.tool"], None)
    plain = python_popen(["/bin/true"])
    assert isinstance(plain, subprocess.Popen) and plain.wait(timeout=10) == 0


def test_files_a_child_opens_stay_open_until_its_own_exit(tmp_path: Path) -> None:
    """The server's sockets are closed in the child through their objects: a socket object that still thought
    it owned its descriptor number would close it again at exit, by then another file's — a worker's SQLite
    -shm file was closed under it that way, and its last write hung on a lock."""
    out = tmp_path / "out.txt"
    script = tmp_path / "late_write.py"
    script.write_text(
        "import atexit, sys\n"
        f"files = [open({str(out)!r}, 'w')] + [open('/dev/null') for _ in range(8)]\n"
        "def late():\n"
        "    files[0].write('written at exit')\n"
        "    files[0].close()\n"
        "atexit.register(late)\n")
    result = python_run([sys.executable, str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert out.read_text() == "written at exit"


def test_the_servers_socket_folder_is_removed_when_its_process_exits(script: Path) -> None:
    """Each test process's server keeps its socket in a temporary folder: gone when that process exits
    (every run left ~10 sf-fork-* folders in /tmp)."""
    code = ("import sys; from tests.support import forkserver; "
            f"forkserver.python_run([sys.executable, {str(script)!r}, '0'], capture_output=True); "
            "print(forkserver.server_folder())")
    done = subprocess.run([sys.executable, "-c", code], cwd=forkserver.ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    folder = done.stdout.strip()
    assert "sf-fork-" in folder, folder
    assert not os.path.exists(folder), f"{folder} is still there"
