"""A local MCP server (streamable HTTP) for tests: the demo server's protocol (dashboard/api/demo_mcp.py)
behind a real socket, answering JSON or server-sent events, with a session id and a bearer token it
checks; `hidden` tools vanish from tools/list; every request is recorded."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dashboard.api import demo_mcp

SESSION = "session-7f3a"


class McpTestServer:
    def __init__(self, *, token: str = "", sse: bool = False, hidden: tuple[str, ...] = ()) -> None:
        self.token, self.sse, self.hidden = token, sse, hidden
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                message = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                fake.requests.append({"headers": dict(self.headers), "message": message})
                if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self.reply(401, b'{"error": "unauthorized"}', "application/json")
                method = message.get("method")
                if method != "initialize" and self.headers.get("Mcp-Session-Id") != SESSION:
                    return self.reply(400, b'{"error": "no session"}', "application/json")
                answer = demo_mcp.answer(message)
                if answer is None:
                    return self.reply(202, b"", "application/json")
                if method == "tools/list":
                    tools = [t for t in answer["result"]["tools"] if t["name"] not in fake.hidden]
                    answer = {**answer, "result": {"tools": tools}}
                if fake.sse:
                    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
                    body = f"data: {json.dumps(note)}\n\nevent: message\ndata: {json.dumps(answer)}\n\n".encode()
                    return self.reply(200, body, "text/event-stream")
                return self.reply(200, json.dumps(answer).encode(), "application/json")

            def reply(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Mcp-Session-Id", SESSION)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mcp"

    def __enter__(self) -> McpTestServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def calls(self) -> list[dict[str, Any]]:
        return [r["message"] for r in self.requests if r["message"].get("method") == "tools/call"]
