"""Fixtures for the engine's unit tests: no database, no Redis, no worker processes.

The engine is plain Python; these tests build graphs and StepCalls directly and, for the HTTP and
OpenAI-compatible nodes, talk to a real HTTP server running in a thread on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from workflows.engine.graph import Graph, Node
from workflows.engine.nodes.base import EngineConfig, StepCall

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def make_call(node_type: str, config: dict[str, Any] | None = None, *, node_id: str = "n",
              node_extra: dict[str, Any] | None = None, context: dict[str, Any] | None = None,
              steps: dict[str, Any] | None = None, start_input: dict[str, Any] | None = None,
              engine: EngineConfig | None = None, now: datetime = NOW, activated_at: datetime = NOW,
              call_index: int = 0, breaker: Any = None, visit: int = 1, attempt: int = 1) -> StepCall:
    """One attempt of one step, as the runtime would hand it to a node kind."""
    extra = node_extra or {}
    node = Node(id=node_id, type=node_type, config=dict(config or {}), timeout_s=extra.get("timeout_s"),
                fallback=extra.get("fallback"), retry=extra.get("retry") or {})
    return StepCall(
        node=node, config=dict(config or {}), context=context if context is not None else {},
        steps=steps or {}, start_input=start_input or {}, instance_id=7, visit=visit, attempt=attempt,
        idempotency_key=f"7:{node_id}:{visit}", trace_id=TRACEPARENT, now=now, activated_at=activated_at,
        engine=engine or EngineConfig(), call_index=call_index, breaker=breaker,
    )


def graph(nodes: list[Any], edges: list[Any], **settings: Any) -> dict[str, Any]:
    """Graph JSON from short forms: a node is "id:type" or a dict; an edge is (source, target[, when])."""
    out_nodes = []
    for node in nodes:
        if isinstance(node, str):
            node_id, _, kind = node.partition(":")
            out_nodes.append({"id": node_id, "type": kind or "python",
                              **({"config": {"function": "noop"}} if (kind or "python") == "python" else {})})
        else:
            out_nodes.append(node)
    out_edges = []
    for edge in edges:
        if isinstance(edge, dict):
            out_edges.append(edge)
            continue
        source, target, *rest = edge
        out_edges.append({"source": source, "target": target, **({"when": rest[0]} if rest else {})})
    data: dict[str, Any] = {"nodes": out_nodes, "edges": out_edges}
    if settings:
        data["settings"] = settings
    return data


def build(nodes: list[Any], edges: list[Any]) -> Graph:
    return Graph.from_json(graph(nodes, edges))


@pytest.fixture(autouse=True, scope="session")
def _example_functions() -> None:
    # Registers "noop" and the examples' functions, which graphs in these tests name.
    import workflows.examples.functions  # noqa: F401


# --- A real HTTP server in a thread ---------------------------------------------------------------

@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, list[str]]  # lower-cased name -> every value sent
    body: bytes


@dataclass
class LocalServer:
    host: str
    port: int
    requests: list[Seen] = field(default_factory=list)
    # path -> handler(request) -> (status, headers, body bytes); set by each test
    routes: dict[str, Callable[[Seen], tuple[int, dict[str, str], bytes]]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]


def json_reply(data: Any, status: int = 200) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(data).encode()


def _default_routes() -> dict[str, Callable[[Seen], tuple[int, dict[str, str], bytes]]]:
    def status(req: Seen) -> tuple[int, dict[str, str], bytes]:
        code = int(req.path.rsplit("/", 1)[1])
        return code, {"Content-Type": "text/plain"}, f"status {code}".encode()

    def slow(req: Seen) -> tuple[int, dict[str, str], bytes]:
        # Sleeps past the client's timeout; the test asserts the error type, not the time taken.
        time.sleep(float(req.query.get("s", ["1.5"])[0]))
        return json_reply({"late": True})

    return {
        "/json": lambda req: json_reply({"ok": True, "method": req.method}),
        "/echo": lambda req: json_reply({"method": req.method, "query": req.query,
                                         "body": req.body.decode() if req.body else None}),
        "/text": lambda req: (200, {"Content-Type": "text/plain"}, b"plain words"),
        "/redirect": lambda req: (302, {"Location": "/json"}, b""),
        "/slow": slow,
        "/status": status,
    }


@pytest.fixture
def local_server() -> Iterator[LocalServer]:
    server_state = LocalServer(host="127.0.0.1", port=0, routes=_default_routes())

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            headers: dict[str, list[str]] = {}
            for name, value in self.headers.items():
                headers.setdefault(name.lower(), []).append(value)
            seen = Seen(self.command, parts.path, parse_qs(parts.query), headers,
                        self.rfile.read(length) if length else b"")
            server_state.requests.append(seen)
            route = server_state.routes.get(parts.path) or server_state.routes.get(
                parts.path.rsplit("/", 1)[0])
            if route is None:
                status, reply_headers, body = 404, {"Content-Type": "text/plain"}, b"no such route"
            else:
                status, reply_headers, body = route(seen)
            try:
                self.send_response(status)
                for name, value in reply_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False
    server_state.port = httpd.server_address[1]
    # A short poll interval: shutdown() waits up to one interval.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server_state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
