"""A Model Context Protocol client over the streamable HTTP transport, on the guarded outbound client.

MCP servers are reached only through `outbound.request` (SSRF checks, allow-list, one deadline, the
body cap), never through a client of their own, so a server URL typed by a designer is held to the
same rules as an http node's. The protocol is JSON-RPC 2.0 POSTed to one endpoint; a server answers
with a JSON body or a server-sent-event stream carrying the response (both are read here), and may
hand out an `Mcp-Session-Id` on `initialize` that every later request repeats.

What can go wrong becomes a step error that names the server, never a hang or a crash: transport
failures and 429/5xx are retryable; other HTTP errors, JSON-RPC errors and malformed answers are
permanent. The server's token never reaches a message.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from workflows.engine import outbound
from workflows.engine.errors import PermanentStepError, StepError
from workflows.engine.secrets import scrub_text

PROTOCOL_VERSION = "2025-06-18"
CLIENT_INFO = {"name": "steadyflow", "version": "1"}
MAX_BYTES = 2_000_000
MAX_PAGES = 20  # tools/list pages followed (a server paging forever is cut off)


class McpError(PermanentStepError):
    code = "mcp_error"


class McpSession:
    def __init__(self, name: str, url: str, token: str, *, policy: outbound.Policy, timeout_s: float,
                 idempotency_key: str | None = None) -> None:
        self.name = name
        self.url = url
        self.token = token
        self.policy = policy
        self.timeout_s = timeout_s
        self.idempotency_key = idempotency_key
        self.session_id: str | None = None
        self._ids = itertools.count(1)

    # --- The protocol -----------------------------------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        result = self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                             "clientInfo": CLIENT_INFO})
        self.notify("notifications/initialized")
        return result

    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            page = result.get("tools")
            if not isinstance(page, list):
                raise self.error("answered tools/list without a list of tools")
            tools += [t for t in page if isinstance(t, dict) and isinstance(t.get("name"), str)]
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return tools

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments)}
        if self.idempotency_key:
            # The step's key, so a server that keeps it can recognise a retried call (MCP's `_meta`).
            params["_meta"] = {"steadyflow/idempotencyKey": self.idempotency_key}
        return self.request("tools/call", params)

    # --- JSON-RPC over streamable HTTP -------------------------------------------------------------

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        ident = next(self._ids)
        reply = self._post({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        message = self._response(reply, ident)
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            text = scrub_text(str(error.get("message") or "error"), (self.token,))[:300]
            raise McpError(f"MCP server '{self.name}' refused {method}: {text} (code {error.get('code')})",
                           details={"server": self.name, "code": error.get("code")})
        result = message.get("result")
        if not isinstance(result, dict):
            raise self.error(f"answered {method} without a result")
        return result

    def notify(self, method: str) -> None:
        self._post({"jsonrpc": "2.0", "method": method})

    def _post(self, message: dict[str, Any]) -> outbound.Reply:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": PROTOCOL_VERSION}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.idempotency_key and message.get("method") == "tools/call":
            headers["Idempotency-Key"] = self.idempotency_key
        try:
            reply = outbound.request("POST", self.url, json=message, headers=headers, policy=self.policy,
                                     timeout_s=self.timeout_s, max_bytes=MAX_BYTES)
        except StepError as exc:
            exc.message = scrub_text(f"MCP server '{self.name}': {exc.message}", (self.token,))
            exc.args = (exc.message,)
            raise
        if reply.status == 429 or reply.status >= 500:
            raise StepError(f"MCP server '{self.name}' answered HTTP {reply.status}",
                            details={"server": self.name, "status": reply.status})
        if reply.status >= 400:
            text = scrub_text(reply.text, (self.token,))[:200]
            raise McpError(f"MCP server '{self.name}' answered HTTP {reply.status}: {text}",
                           details={"server": self.name, "status": reply.status})
        self.session_id = reply.header("mcp-session-id") or self.session_id
        return reply

    def _response(self, reply: outbound.Reply, ident: int) -> dict[str, Any]:
        content_type = (reply.header("content-type") or "").lower()
        messages = sse_messages(reply.body) if "text/event-stream" in content_type else [_json(reply.body)]
        for message in messages:
            if isinstance(message, dict) and message.get("id") == ident and ("result" in message or "error" in message):
                return message
        raise self.error("sent no answer to the request")

    def error(self, what: str) -> McpError:
        return McpError(f"MCP server '{self.name}' {what}", details={"server": self.name})


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def sse_messages(body: bytes) -> list[Any]:
    """The JSON messages of a server-sent-event stream (each event's `data:` lines joined)."""
    found: list[Any] = []
    data: list[bytes] = []
    for line in [*body.split(b"\n"), b""]:
        line = line.rstrip(b"\r")
        if line.startswith(b"data:"):
            data.append(line[5:].strip())
        elif not line and data:
            found.append(_json(b"\n".join(data)))
            data = []
    return found


def result_text(result: Mapping[str, Any]) -> str:
    """The text parts of a tools/call result, joined (what a model reads back)."""
    content = result.get("content")
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p.get("text")) for p in parts if isinstance(p, dict) and p.get("type") == "text")
