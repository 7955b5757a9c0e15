"""daphne serving the application on a free port, for tests that need the real ASGI web process (HTTP and
WebSockets) against whatever database the environment names; and a logged-in client for it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import ROOT, wait_for
from tests.support.forkserver import python_popen


class Web:
    """daphne serving the application with `env`, on a free port; its output goes to `log`."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc = python_popen(
            [sys.executable, "-m", "daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(self.port),
             "dashboard.asgi:application"],
            cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)

        def up() -> bool:
            assert self.proc.poll() is None, f"daphne exited: {log.read_text()}"
            try:
                return httpx.get(self.url + "/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 30, message="daphne")

    def login(self, username: str, password: str) -> httpx.Client:
        """A client logged in through the login form (its session and CSRF cookies set)."""
        client = httpx.Client(base_url=self.url, timeout=10)
        client.get("/accounts/login/")
        answer = client.post("/accounts/login/", data={"username": username, "password": password,
                                                       "csrfmiddlewaretoken": client.cookies["csrftoken"]})
        assert answer.status_code == 302, (answer.status_code, answer.text[:500])
        return client

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
