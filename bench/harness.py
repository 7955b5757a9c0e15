"""What the workloads run on: a throwaway database, a private Redis and worker processes.

Nothing here imports Django: the database must exist (and DATABASE_URL point at it) before Django
reads its settings. Every process started here is in its own session and is stopped by `Cluster.stop`,
which `python -m bench` calls on normal exit, on an error and on Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

from scripts.devrun import redis_binary  # the dev runner's bundled redis-server

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def production_keys() -> dict[str, str]:
    """The keys production settings refuse to start without (the benchmarks run with DEBUG off: DEBUG
    would log every query): SECRET_KEY and STEADYFLOW_CREDENTIALS_KEY, the environment's or throwaway ones."""
    from cryptography.fernet import Fernet

    credentials_key = os.environ.get("STEADYFLOW_CREDENTIALS_KEY") or Fernet.generate_key().decode()
    return {"SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
            "STEADYFLOW_CREDENTIALS_KEY": credentials_key}


def note(message: str) -> None:
    """Progress and details go to stderr: stdout carries only the JSON lines."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# --- Database ------------------------------------------------------------------------------------

@dataclass
class BenchDatabase:
    """A database that exists only for one benchmark run."""

    url: str
    kind: str  # "postgresql" or "sqlite"
    _admin_url: str | None = None
    _name: str | None = None
    _tmpdir: str | None = None

    @classmethod
    def create(cls, source_url: str | None, tmpdir: str) -> BenchDatabase:
        """Make a fresh database next to the one `source_url` names, never that one itself."""
        if source_url and source_url.split("://", 1)[0] in ("postgres", "postgresql", "pgsql"):
            return cls._create_postgres(source_url)
        path = Path(tmpdir) / "bench.sqlite3"
        return cls(url=f"sqlite:///{path}", kind="sqlite", _tmpdir=tmpdir)

    @classmethod
    def _create_postgres(cls, source_url: str) -> BenchDatabase:
        import psycopg

        parts = urlsplit(source_url)
        base = parts.path.lstrip("/") or "steadyflow"
        # Derived from the developer's own database name, so two people's runs do not collide, and
        # dropped first in case an earlier run was killed before it could clean up.
        name = f"{base}_bench"
        admin = urlunsplit((_pg_scheme(parts.scheme), parts.netloc, "/postgres", parts.query, ""))
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
        return cls(url=url, kind="postgresql", _admin_url=admin, _name=name)

    def drop(self) -> None:
        if self.kind == "postgresql" and self._admin_url and self._name:
            import psycopg

            try:
                with psycopg.connect(self._admin_url, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{self._name}" WITH (FORCE)')
            except psycopg.Error as exc:
                note(f"could not drop database {self._name}: {exc}")

    def migrate(self, env: dict[str, str]) -> None:
        subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)

    def execute(self, sql: str) -> None:
        """Run SQL on the migrated database (`--setup-sql`: a schema proposal measured without a migration)."""
        if self.kind == "postgresql":
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(sql.encode())
        else:
            import sqlite3

            with sqlite3.connect(urlsplit(self.url).path) as conn:
                conn.executescript(sql)


def redact(url: str) -> str:
    """A database URL fit for a log line: the password, if any, masked."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def _pg_scheme(scheme: str) -> str:
    # psycopg accepts postgresql:// and postgres://; dj-database-url also knows pgsql://.
    return "postgresql" if scheme == "pgsql" else scheme


# --- Redis ---------------------------------------------------------------------------------------




# --- Processes -----------------------------------------------------------------------------------

@dataclass
class Cluster:
    """The processes of one benchmark run, with their logs in a temporary directory."""

    env: dict[str, str]
    logdir: Path
    procs: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = field(default_factory=list)
    # Run worker processes under cProfile, writing <label>.prof next to the logs when they stop.
    profile_workers: bool = False

    def spawn(self, label: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.logdir / f"{label}.log", "wb")  # noqa: SIM115 - closed in stop()
        proc = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **(env or {})}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((label, proc, log))
        return proc

    def manage(self, label: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        profiler: list[str] = []
        if self.profile_workers and label.startswith("worker-"):
            profiler = ["-m", "cProfile", "-o", str(self.logdir / f"{label}.prof")]
        return self.spawn(label, [PY, *profiler, "manage.py", *args], env=env)

    def start_redis(self) -> str:
        sock = self.logdir / "redis.sock"
        self.spawn("redis", [redis_binary(), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
                             "--save", "", "--appendonly", "no", "--dir", str(self.logdir),
                             "--loglevel", "warning"])
        wait_until(sock.exists, 10, "the private redis-server to start")
        return f"unix://{sock}"

    def pids(self, prefix: str) -> list[int]:
        return [proc.pid for label, proc, _ in self.procs if label.startswith(prefix) and proc.poll() is None]

    def check_alive(self) -> None:
        for label, proc, _ in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{label} exited with {proc.returncode}:\n{self.tail(label)}")

    def tail(self, label: str, chars: int = 3000) -> str:
        path = self.logdir / f"{label}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self, label: str | None = None) -> None:
        """Stop one process (by label) or all of them: SIGTERM to its group, SIGKILL after 10 s."""
        chosen = [p for p in self.procs if label is None or p[0] == label]
        # Redis last: workers shutting down still talk to it.
        chosen.sort(key=lambda p: p[0] == "redis")
        for group in ([p for p in chosen if p[0] != "redis"], [p for p in chosen if p[0] == "redis"]):
            for _, proc, _ in group:
                if proc.poll() is None:
                    try:
                        os.killpg(proc.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + 10
            for _, proc, log in group:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
                log.close()
        self.procs = [p for p in self.procs if p not in chosen]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02,
               check: Callable[[], None] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        if check is not None:
            check()
        time.sleep(interval)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used so far (Linux /proc): other work on a shared
    machine moves it much less than it moves wall time."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone, or not Linux
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


def make_tmpdir() -> str:
    # Short path: a unix socket path must stay under ~100 bytes.
    return tempfile.mkdtemp(prefix="sfbench-")


def make_database(source_url: str | None) -> tuple[str, BenchDatabase]:
    """A temporary directory and the throwaway database; on failure neither is left behind."""
    tmpdir = make_tmpdir()
    try:
        return tmpdir, BenchDatabase.create(source_url, tmpdir)
    except Exception as exc:  # noqa: BLE001 - e.g. PostgreSQL down or no right to create a database
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise SystemExit(f"could not create the benchmark's database next to {redact(source_url or '')}: "
                         f"{exc}") from None


class LockSampler:
    """Samples what the throwaway database's backends are doing, every `interval` seconds, on its own
    connection in a thread: the share of time they wait on a lock (the instance row lock serialises
    the transitions of one instance) or sit idle inside a transaction (round trips in flight)."""

    def __init__(self, url: str, interval: float = 0.01) -> None:
        import threading

        self.url = url.replace("postgres://", "postgresql://", 1)
        self.interval = interval
        self.samples: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-lock-sampler")

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(self.interval):
                rows = conn.execute(
                    "SELECT state, wait_event_type FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchall()
                for state, wait in rows:
                    key = "lock" if wait == "Lock" else (state or "unknown")
                    self.samples[key] = self.samples.get(key, 0) + 1

    def __enter__(self) -> LockSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def summary(self) -> str:
        busy = {k: v for k, v in self.samples.items() if k != "idle"}
        total = sum(busy.values())
        if not total:
            return "no busy backend sampled"
        return "busy backends: " + ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(busy.items(),
                                                                                        key=lambda kv: -kv[1]))
