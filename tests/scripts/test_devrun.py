"""`make run` (scripts/devrun.py run) starts and stops its processes cleanly: any burst of SIGTERM and
SIGINT stops everything, its children die with it even when it is SIGKILLed, a leftover from a
crashed run is reported with its PIDs, and a restart right after a stop gets its port.

Each runner here is real: a private Redis, daphne, the three workers and the scheduler, on a SQLite
database and a var/ directory of this module's own (migrated by the first start), examples skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent.parent
CHILDREN = 6  # Redis, web, three workers, scheduler
UP = "Steadyflow is up"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PDEATHSIG is Linux")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alive(pid: int) -> bool:
    """Running (a zombie, waiting to be reaped, has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def time_wait_on(port: int) -> int:
    """Sockets in TIME_WAIT whose local port is `port` (/proc/net/tcp: state 06)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "06":
            count += 1
    return count


class Runner:
    def __init__(self, var: Path, port: int, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "DEBUG")}
        env.update({"STEADYFLOW_VAR_DIR": str(var), "PORT": str(port), "PYTHONUNBUFFERED": "1",
                    "LOG_LEVEL": "WARNING"})
        self.port = port
        self.log = log
        self.pidfile = var / "devrun.pid"
        with open(log, "ab") as out:
            # A session of its own, like a terminal's job: the signals here go to the runner only.
            self.proc = subprocess.Popen([sys.executable, "scripts/devrun.py", "run", "--no-examples"],
                                         cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_up(self) -> set[int]:
        """Until every child runs and the web server answers; the children's pids."""
        wait_for(lambda: UP in self.text() or self.proc.poll() is not None, timeout=180,
                 message="the runner to start everything")
        assert self.proc.poll() is None, self.text()
        wait_for(lambda: len(children_of(self.proc.pid)) >= CHILDREN, timeout=30, message="all children")
        wait_for(self.answers, timeout=120, message="the web server")
        recorded = {row["pid"] for row in json.loads(self.pidfile.read_text())["processes"]}
        children = children_of(self.proc.pid)
        assert recorded == children | {self.proc.pid}, (recorded, children)
        return children

    def answers(self) -> bool:
        """One request that the server closes (Connection: close): it leaves a TIME_WAIT behind."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
                conn.sendall(b"GET /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                reply = conn.recv(64)
                while conn.recv(65536):
                    pass
                return reply.startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    def wait_exit(self) -> int:
        return self.proc.wait(timeout=120)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def var() -> Iterator[Path]:
    # Short: the private Redis's unix socket lives here (paths are limited to ~107 bytes).
    path = Path(tempfile.mkdtemp(prefix="sf-devrun-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def runners(var: Path, tmp_path: Path) -> Iterator[list[Runner]]:
    started: list[Runner] = []
    yield started
    for runner in started:
        runner.kill()  # the children follow it (PDEATHSIG)
    for runner in started:
        print(f"--- runner {runner.proc.pid}\n{runner.text()[-3000:]}")


def start(runners: list[Runner], var: Path, tmp_path: Path, port: int) -> Runner:
    runner = Runner(var, port, tmp_path / f"runner-{len(runners)}.log")
    runners.append(runner)
    return runner


@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_bursts_stop_everything(runners, var, tmp_path, first):
    runner = start(runners, var, tmp_path, free_port())
    children = runner.wait_up()
    # A burst, then more while the clean-up runs (children take a moment to stop).
    for signum in (first, signal.SIGTERM, signal.SIGINT, first):
        runner.proc.send_signal(signum)
    for _ in range(20):
        if runner.proc.poll() is not None:
            break
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                runner.proc.send_signal(signum)
            except ProcessLookupError:
                break
        time.sleep(0.1)
    assert runner.wait_exit() == 0, runner.text()
    left = {pid for pid in children if alive(pid)}
    assert not left, f"children left running: {left}\n{runner.text()}"
    assert not runner.pidfile.exists()
    assert runner.text().count("[steadyflow] stopping") == 1


def test_children_die_with_a_sigkilled_runner_and_the_next_start_is_clean(runners, var, tmp_path):
    port = free_port()
    runner = start(runners, var, tmp_path, port)
    children = runner.wait_up()
    runner.proc.send_signal(signal.SIGKILL)
    runner.proc.wait()
    wait_for(lambda: not any(alive(pid) for pid in children), timeout=30,
             message=f"the children of the killed runner to exit ({children})")
    # Its pidfile stays behind, naming processes that are gone: the next start goes ahead.
    assert runner.pidfile.exists()
    again = start(runners, var, tmp_path, port)
    again.wait_up()
    again.proc.send_signal(signal.SIGTERM)
    assert again.wait_exit() == 0, again.text()


def test_a_restart_right_after_a_stop_gets_its_port(runners, var, tmp_path):
    port = free_port()
    runner = start(runners, var, tmp_path, port)
    runner.wait_up()
    assert runner.answers()
    runner.proc.send_signal(signal.SIGTERM)
    assert runner.wait_exit() == 0, runner.text()
    # The connections the server closed linger in TIME_WAIT: a bind without SO_REUSEADDR would fail.
    assert time_wait_on(port) > 0
    again = start(runners, var, tmp_path, port)
    again.wait_up()
    assert "in use" not in again.text()
    again.proc.send_signal(signal.SIGINT)
    assert again.wait_exit() == 0, again.text()


def test_a_leftover_of_a_crashed_run_is_reported_with_its_pids(var, tmp_path):
    """A process recorded in var/devrun.pid that is still alive (same pid, same start time) stops the
    start with its PID, before the port or Redis are touched; a pid reused by another process is not
    mistaken for it."""
    leftover = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        stat = Path(f"/proc/{leftover.pid}/stat").read_text()
        started = stat[stat.rfind(")") + 2:].split()[19]
        pidfile = var / "devrun.pid"
        pidfile.write_text(json.dumps({"processes": [
            {"pid": leftover.pid, "what": "worker io", "started": started},
            {"pid": os.getpid(), "what": "runner", "started": "1"},  # alive, but another process now
        ]}))
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        env.update({"STEADYFLOW_VAR_DIR": str(var), "PORT": str(free_port())})
        result = subprocess.run([sys.executable, "scripts/devrun.py", "run", "--no-examples"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode != 0
        assert f"PID {leftover.pid} (worker io)" in result.stderr, result.stderr
        assert f"kill {leftover.pid}" in result.stderr
        assert str(os.getpid()) not in result.stderr
        assert pidfile.exists() and "private Redis" not in result.stderr
    finally:
        leftover.kill()
        leftover.wait()
        (var / "devrun.pid").unlink(missing_ok=True)
