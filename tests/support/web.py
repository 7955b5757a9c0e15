"""daphne serving the application (HTTP and WebSockets) on a free port, against whatever database and Redis
its environment names, for the tests that need the real ASGI web process: the browser pages with sockets
(tests/e2e), /metrics and the access log (tests/workflows/test_observability.py), and the web process under
a database crash (tests/faults/test_database_crash.py). It can be killed and started again on the same
port (tests of reconnecting pages)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx

from tests.support.forkserver import python_popen

ROOT = Path(__file__).resolve().parents[2]


class DaphneServer:
    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = env
        self.log_dir = log_dir
        self.proc: Any = None
        self.starts = 0

    @property
    def log(self) -> Path:
        """The output of the latest start."""
        return self.log_dir / f"daphne-{self.starts}.log"

    def start(self, timeout: float = 30.0) -> None:
        self.starts += 1
        log = open(self.log, "wb")
        self.proc = python_popen(
            [sys.executable, "-m", "daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(self.port),
             "dashboard.asgi:application"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"daphne exited at start: {self.logs()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"daphne did not answer within {timeout} s: {self.logs()}")

    def login(self, username: str, password: str) -> httpx.Client:
        """A client logged in through the login form (its session and CSRF cookies set)."""
        client = httpx.Client(base_url=self.url, timeout=10)
        client.get("/accounts/login/")
        answer = client.post("/accounts/login/", data={"username": username, "password": password,
                                                       "csrfmiddlewaretoken": client.cookies["csrftoken"]})
        assert answer.status_code == 302, (answer.status_code, answer.text[:500])
        return client

    def kill(self) -> None:
        """SIGKILL: every socket it held drops at once, as when a server dies."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(self.log_dir.glob("daphne-*.log")))
