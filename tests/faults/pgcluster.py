"""A private PostgreSQL cluster the fault suite may crash: initdb + pg_ctl in a temporary directory,
on a free port of 127.0.0.1, trust authentication, default durability settings (fsync and
synchronous_commit on). `crash()` is `pg_ctl stop -m immediate`: every server process quits at once
without a checkpoint, and the next start runs crash recovery from the WAL, as after a power cut of
the database host's processes.

PostgreSQL refuses to run as root: as root the binaries run as the `postgres` user (runuser).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BIN_DIRS = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin")


def bin_dir() -> Path | None:
    for candidate in BIN_DIRS:
        if (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateCluster:
    """`small_disk_mb`: the data directory on a tmpfs of that size (root only: it mounts one) and the
    WAL outside it, so `fill_disk()` makes the database's writes fail with "No space left on device"
    (relation files cannot grow) without the PANIC a full WAL disk is (a crash, tested separately)."""

    def __init__(self, small_disk_mb: int | None = None) -> None:
        found = bin_dir()
        if found is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
        self.bin = found
        self.dir = Path(tempfile.mkdtemp(prefix="sf-pg-"))
        self.small_disk_mb = small_disk_mb
        self.mount: Path | None = None
        self.filler: Path | None = None
        self.data = self.dir / "data"
        self.wal = self.dir / "wal"
        self.log = self.dir / "server.log"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)

    def init(self) -> None:
        if self.small_disk_mb:
            self.mount = self.dir / "small"
            self.mount.mkdir()
            user = pwd.getpwnam("postgres")
            subprocess.run(["mount", "-t", "tmpfs", "-o",
                            f"size={self.small_disk_mb}m,uid={user.pw_uid},gid={user.pw_gid},mode=0700",
                            "tmpfs", str(self.mount)], check=True, capture_output=True, text=True)
            self.data = self.mount / "data"
        self._run("initdb", "-D", str(self.data), "-X", str(self.wal), "-A", "trust", "-U", "postgres",
                  "--encoding", "UTF8", "--no-instructions")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                       f"unix_socket_directories = '{self.dir}'\nmax_connections = 60\n"
                       "shared_buffers = 32MB\n")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "120", "start")

    def crash(self) -> None:
        """Every server process quits at once: no checkpoint, no goodbye to clients."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        except subprocess.CalledProcessError:
            pass  # not running

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def wait_ready(self, timeout: float = 60) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def fill_disk(self) -> int:
        """Take every free byte of the small disk; how many were taken."""
        assert self.mount is not None, "a cluster made with small_disk_mb"
        self.filler = self.mount / "filler"
        chunk = b"\0" * (1 << 20)
        taken = 0
        with open(self.filler, "wb", buffering=0) as out:
            try:
                while True:
                    taken += out.write(chunk)
            except OSError:
                pass
            try:  # the last partial chunk's worth
                while True:
                    taken += out.write(b"\0" * 4096)
            except OSError:
                pass
        return taken

    def free_disk(self) -> None:
        if self.filler is not None:
            self.filler.unlink(missing_ok=True)
            self.filler = None

    def close(self) -> None:
        self.stop()
        if self.mount is not None:
            subprocess.run(["umount", "-l", str(self.mount)], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
