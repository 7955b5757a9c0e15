"""A live page's socket, for the fault tests: a thread that keeps `/ws/dashboard/` open as the dashboard
page does (reconnecting half a second after the server closes it) and records every message with the
moment it arrived, so a test can say whether the live view carried on after a fault."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import aiohttp


class LiveWatch:
    def __init__(self, base_url: str, cookies: dict[str, str], path: str = "/ws/dashboard/") -> None:
        self.url = base_url.replace("http://", "ws://") + path
        self.origin = base_url
        self.cookies = cookies
        self.messages: list[tuple[float, dict[str, Any]]] = []
        self.connects: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    def after(self, moment: float, kind: str) -> list[dict[str, Any]]:
        """The messages of type `kind` that arrived after `moment` (time.monotonic())."""
        return [m for at, m in list(self.messages) if at > moment and m.get("type") == kind]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                async with aiohttp.ClientSession(cookies=self.cookies) as session:
                    async with session.ws_connect(self.url, headers={"Origin": self.origin}, heartbeat=5) as ws:
                        self.connects.append(time.monotonic())
                        while not self._stop.is_set():
                            try:
                                frame = await ws.receive(timeout=0.5)
                            except TimeoutError:
                                continue
                            if frame.type != aiohttp.WSMsgType.TEXT:
                                break  # closed: reconnect, as the page does
                            self.messages.append((time.monotonic(), json.loads(frame.data)))
            except (aiohttp.ClientError, OSError):
                pass  # the web process is away or refusing: try again
            await asyncio.sleep(0.5)
