"""A fork server for the Python processes the suite starts (workers, schedulers, daphne, `manage.py` commands).

Why: the serial tier starts about a thousand Python processes, and each spent ~1.5 s of CPU importing Django,
redis, psycopg, structlog, OpenTelemetry, ninja, pydantic ... before doing anything — on two cores that was
most of the tier's time. The server imports those libraries once (never the project's settings, apps or
models: `django.setup()` still runs in each child, from the child's own environment), then forks a child per
request. A child is a real process like any other: its own pid and process group (`start_new_session`), its
own environment, working directory, argv and standard streams; a test may SIGKILL it mid-commit, SIGSTOP it,
or read its log, exactly as before. Only its parent differs (the server, which reaps it and reports the exit
status), so the client side (`ForkedProcess`) offers the part of `subprocess.Popen` the tests use.

`python_popen` / `python_run` are drop-in for `subprocess.Popen` / `subprocess.run` when the command is
`sys.executable` running a script or `-m module`; anything else (or STEADYFLOW_TEST_FORKSERVER=0) takes the
plain subprocess path. One server per test process (each pytest-xdist worker), started on first use and gone
when that process exits (it watches a pipe from it).

The protocol is one SOCK_SEQPACKET connection per child: the request (JSON + the child's three stdio fds
passed with SCM_RIGHTS), the reply {"pid"} once the child is in its own session, later {"exit"} once reaped.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# What the server imports before it forks. Libraries only, and the framework-free engine (workflows/engine
# imports no Django: tests/engine/test_no_framework_imports.py): nothing here may configure Django's settings,
# read the environment into a constant, or start a thread (checked after the imports). Not django_rq or ninja:
# both read settings at import. Not daphne: importing daphne.server installs Twisted's asyncio reactor, whose
# event loop (and epoll descriptor) every child would share.
PRELOAD = (
    "django", "django.db.models", "django.db.backends.postgresql.base", "django.db.backends.sqlite3.base",
    "django.contrib.admin", "django.urls", "django.http", "django.template", "django.forms",
    "django.core.management", "django.core.serializers.json", "django.core.handlers.asgi",
    "django.core.handlers.wsgi", "django.contrib.staticfiles.handlers", "redis", "redis.asyncio", "rq",
    "rq.worker", "rq.job", "rq.registry", "psycopg", "structlog", "structlog.dev", "structlog.stdlib",
    "opentelemetry", "opentelemetry.sdk.metrics", "opentelemetry.sdk.trace", "pydantic", "pydantic.fields",
    "pydantic.main", "pydantic.json_schema", "pydantic.networks", "pydantic.functional_validators",
    "pydantic.dataclasses", "pydantic.type_adapter", "jsonschema", "httpx", "channels", "channels.layers",
    "channels.generic.websocket", "channels_redis.core", "prometheus_client", "croniter", "cryptography.fernet",
    "asgiref.sync", "workflows.engine",
)
ENGINE_PACKAGE = "workflows.engine"


# --- the server ------------------------------------------------------------------------------------------

BASE_PATH = sys.path[1:]  # the interpreter's path without this script's folder (a child puts its own first)


def preload() -> None:
    sys.path.insert(0, str(ROOT))
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional library this install lacks
            continue
    import pkgutil

    engine = sys.modules.get(ENGINE_PACKAGE)
    if engine is not None:
        for info in pkgutil.walk_packages(engine.__path__, ENGINE_PACKAGE + "."):
            importlib.import_module(info.name)
    from django.conf import settings

    # A child must read its own settings: a preloaded module that configured them would leak ours into it.
    assert not settings.configured, "a preloaded module configured Django's settings"
    assert threading.active_count() == 1, "a preloaded module started a thread: forking would be unsafe"
    # Keep the preloaded objects out of the children's garbage collections: a collection touches every object
    # it tracks, which would copy each page of this process into every child (copy-on-write).
    gc.collect()
    gc.freeze()


def serve(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "parent")  # EOF: the test process is gone
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                if not sys.stdin.buffer.read1(1):
                    return
            elif key.data == "accept":
                conn, _ = listener.accept()
                child = spawn_child(conn, listener, selector)
                if child is None:
                    conn.close()
                else:
                    selector.register(child, selectors.EVENT_READ, ("reap", conn))
            else:
                _, conn = key.data
                pidfd = key.fileobj
                selector.unregister(pidfd)
                pid = pidfd_pids.pop(pidfd)  # type: ignore[call-overload]
                _, status = os.waitpid(pid, 0)
                os.close(pidfd)  # type: ignore[arg-type]
                try:
                    conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
                except OSError:
                    pass  # the client went away first
                conn.close()


pidfd_pids: dict[int, int] = {}


def spawn_child(conn: socket.socket, listener: socket.socket, selector: selectors.BaseSelector) -> int | None:
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    if not message or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    request = json.loads(message)
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        selector.close()
        run_child(request, fds, ready_w, [listener, conn])  # never returns
    os.close(ready_w)
    for fd in fds:
        os.close(fd)
    os.read(ready_r, 1)  # the child is in its own session (or exited): its pid is a valid process group
    os.close(ready_r)
    pidfd = os.pidfd_open(pid)
    pidfd_pids[pidfd] = pid
    conn.send(json.dumps({"pid": pid}).encode())
    return pidfd


def run_child(request: dict[str, Any], fds: list[int], ready_w: int, server_sockets: list[socket.socket]) -> None:
    """In the forked child: become the requested program. Ends the way that program's interpreter would
    (its SystemExit or uncaught exception propagates to the top of this process)."""
    import io
    import runpy

    if request["new_session"]:
        os.setsid()
    os.close(ready_w)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    # Closed through their objects, never by number: an object that still thought it owned its number would
    # close it again when collected, by then some other file's (seen: SQLite's -shm, under a worker's feet).
    for sock in server_sockets:
        sock.close()
    for fd in pidfd_pids:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True, write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True, write_through=True)
    argv: list[str] = request["argv"]
    if argv[0] == "-m":  # as `python -m`: the working directory first on the path
        sys.path[:] = [request["cwd"], *BASE_PATH]
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:  # as `python script.py`: the script's folder first
        script = Path(request["cwd"], argv[0])
        sys.path[:] = [str(script.parent), *BASE_PATH]
        sys.argv = list(argv)
        runpy.run_path(str(script), run_name="__main__")
    sys.exit(0)


# --- the client ------------------------------------------------------------------------------------------

class _Server:
    """This process's fork server, started on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.path = ""

    def address(self) -> str:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                directory = tempfile.mkdtemp(prefix="sf-fork-")
                self.path = os.path.join(directory, "s")
                env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
                self.proc = subprocess.Popen([sys.executable, __file__, self.path], cwd=ROOT, env=env,
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                assert self.proc.stdout is not None
                line = self.proc.stdout.readline()
                if line.strip() != b"ready":
                    raise RuntimeError("the test fork server did not start")
                atexit.register(self.close)
            return self.path

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        if self.path:
            # The socket's folder: each test process left one behind in the temporary directory.
            shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


_server = _Server()


def server_pid() -> int | None:
    """This process's fork server's pid (None before its first use)."""
    return _server.proc.pid if _server.proc is not None else None


def server_folder() -> str:
    """The folder of this process's fork server's socket ("" before its first use)."""
    return os.path.dirname(_server.path)


def enabled() -> bool:
    return os.environ.get("STEADYFLOW_TEST_FORKSERVER", "1") != "0" and hasattr(os, "pidfd_open")


class ForkedProcess:
    """The part of `subprocess.Popen` the tests use, for a child of the fork server."""

    def __init__(self, args: Sequence[str], conn: socket.socket, pid: int) -> None:
        self.args = list(args)
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = self.stdout = self.stderr = None
        self._conn = conn

    def _collect(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        self._conn.settimeout(timeout)
        try:
            reply = self._conn.recv(4096)
        except (TimeoutError, BlockingIOError):
            return None
        if not reply:
            raise RuntimeError(f"the fork server lost child {self.pid}")
        self.returncode = int(json.loads(reply)["exit"])
        self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._collect(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._collect(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.wait()


def _fd_for(stream: Any, default: int, opened: list[int], stdout_fd: int | None = None) -> int:
    if stream is None:
        return default
    if stream == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
        opened.append(fd)
        return fd
    if stream == subprocess.STDOUT:
        assert stdout_fd is not None
        return stdout_fd
    if stream == subprocess.PIPE:
        raise ValueError("python_popen does not offer pipes: pass a file (python_run captures output)")
    return stream if isinstance(stream, int) else stream.fileno()


# Read by the interpreter at its start, so a child of the server cannot honour a different value: such a
# request takes the plain subprocess path (e.g. tests/faults/skewed_clock's sitecustomize on PYTHONPATH).
STARTUP_VARIABLES = ("PYTHONPATH", "PYTHONHASHSEED", "PYTHONSTARTUP", "PYTHONNOUSERSITE", "PYTHONWARNINGS",
                     "PYTHONDEVMODE", "PYTHONOPTIMIZE", "PYTHONSAFEPATH", "PYTHONHOME")


def _forkable(args: Sequence[str], env: dict[str, str] | None) -> bool:
    if not enabled() or len(args) < 2 or args[0] != sys.executable:
        return False
    if args[1].startswith("-") and not (args[1] == "-m" and len(args) > 2):
        return False
    chosen = os.environ if env is None else env
    return all(chosen.get(name) == os.environ.get(name) for name in STARTUP_VARIABLES)


def python_popen(args: Sequence[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None,
                 stdin: Any = None, stdout: Any = None, stderr: Any = None,
                 start_new_session: bool = False) -> Any:
    """`subprocess.Popen(args, ...)` for `[sys.executable, script_or_-m, ...]`, forked from the server."""
    if not _forkable(args, env) or subprocess.PIPE in (stdin, stdout, stderr):
        return subprocess.Popen(list(args), cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                                start_new_session=start_new_session)
    opened: list[int] = []
    try:
        fd_in = _fd_for(stdin, -1, opened)
        if fd_in == -1:
            fd_in = os.open(os.devnull, os.O_RDONLY)
            opened.append(fd_in)
        fd_out = _fd_for(stdout, 1, opened)
        fd_err = _fd_for(stderr, 2, opened, stdout_fd=fd_out)
        request = {"argv": list(args[1:]), "cwd": str(cwd or os.getcwd()),
                   "env": dict(os.environ if env is None else env), "new_session": start_new_session}
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(_server.address())
        socket.send_fds(conn, [json.dumps(request).encode()], [fd_in, fd_out, fd_err])
        reply = conn.recv(4096)
        if not reply:
            raise RuntimeError("the test fork server refused the request")
        return ForkedProcess(args, conn, int(json.loads(reply)["pid"]))
    finally:
        for fd in opened:
            os.close(fd)


def python_run(args: Sequence[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None,
               capture_output: bool = False, text: bool = False, timeout: float | None = None,
               check: bool = False, input: Any = None) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run(args, ...)` for `[sys.executable, script_or_-m, ...]`, forked from the server."""
    if not _forkable(args, env) or input is not None:
        return subprocess.run(list(args), cwd=cwd, env=env, capture_output=capture_output, text=text,
                              timeout=timeout, check=check, input=input)
    out = tempfile.TemporaryFile() if capture_output else None
    err = tempfile.TemporaryFile() if capture_output else None
    try:
        proc = python_popen(args, cwd=cwd, env=env, stdout=out, stderr=err)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise

        def read(f: Any) -> Any:
            if f is None:
                return None
            f.seek(0)
            data = f.read()
            return data.decode() if text else data

        result = subprocess.CompletedProcess(list(args), proc.returncode, read(out), read(err))
    finally:
        for f in (out, err):
            if f is not None:
                f.close()
    if check:
        result.check_returncode()
    return result


if __name__ == "__main__":
    preload()
    serve(sys.argv[1])
