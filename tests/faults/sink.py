"""A local HTTP endpoint that records every request's `Idempotency-Key`, as a payment or e-mail API
that honours the header would.

Each key's effect is applied once: the first request with a key applies it and stores the response;
a repeat (a re-run after a crash) gets the stored response back and applies nothing. The fault tests
read both counts: `deliveries` (every request that arrived) and `effects` (what actually happened).

Query parameters shape the response: `delay` (seconds before answering, so a test can kill a worker
while the request is in flight) and `size` (bytes of filler in the body).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Delivery:
    key: str
    path: str
    at: float
    replay: bool


class Sink:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self.deliveries: list[Delivery] = []
        self.effects: Counter[str] = Counter()
        self._responses: dict[str, dict[str, Any]] = {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="fault-sink")

    # --- Lifecycle -------------------------------------------------------------------------------

    def start(self) -> Sink:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def host_port(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def url(self, path: str = "/effect", **params: Any) -> str:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"http://{self.host_port}{path}{'?' + query if query else ''}"

    # --- What the tests read ---------------------------------------------------------------------

    def deliveries_of(self, key: str) -> int:
        with self._lock:
            return sum(1 for d in self.deliveries if d.key == key)

    def keys(self) -> set[str]:
        with self._lock:
            return {d.key for d in self.deliveries}

    def delivery_counts(self) -> Counter[str]:
        with self._lock:
            return Counter(d.key for d in self.deliveries)

    def replays(self) -> int:
        with self._lock:
            return sum(1 for d in self.deliveries if d.replay)

    def wait_for_key(self, key: str, timeout: float = 30.0, count: int = 1) -> None:
        """Block until `count` requests with `key` have arrived (they may still be waiting to be answered)."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while sum(1 for d in self.deliveries if d.key == key) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the sink saw {self.deliveries_of_locked(key)} request(s) with "
                                         f"Idempotency-Key {key}, expected {count}, within {timeout} s")
                self._arrived.wait(left)

    def deliveries_of_locked(self, key: str) -> int:
        return sum(1 for d in self.deliveries if d.key == key)

    # --- Serving ---------------------------------------------------------------------------------

    def _record(self, key: str, path: str) -> dict[str, Any]:
        with self._arrived:
            replay = key in self._responses
            if not replay:
                self.effects[key] += 1
                self._responses[key] = {"key": key, "effect": len(self._responses) + 1, "path": path}
            self.deliveries.append(Delivery(key=key, path=path, at=time.monotonic(), replay=replay))
            self._arrived.notify_all()
            return {**self._responses[key], "replayed": replay}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                parts = urlsplit(self.path)
                params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                key = self.headers.get("Idempotency-Key") or ""
                if not key:
                    self._reply(400, {"message": "Idempotency-Key header is required"})
                    return
                body = sink._record(key, parts.path)
                time.sleep(float(params.get("delay", 0)))
                size = int(params.get("size", 0))
                if size:
                    body["filler"] = "x" * size
                self._reply(200, body, replayed=body["replayed"])

            def _reply(self, status: int, body: dict[str, Any], replayed: bool = False) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if replayed:
                        self.send_header("Idempotent-Replayed", "true")
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the worker was killed while waiting: the request still counted

            do_GET = _serve
            do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
