"""A small MCP server (streamable HTTP, JSON answers) for the examples: `make run` serves it at
/demo/mcp (with the other demo endpoints, STEADYFLOW_DEMO_ENDPOINTS) so an MCP example runs offline.

`answer(message)` is the whole protocol side — initialize, tools/list, tools/call — kept apart from
the view so the tests' local server (tests/support/mcp_server.py) speaks exactly the same.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

PROTOCOL_VERSION = "2025-06-18"
ORDERS = {"A-100": {"status": "shipped", "carrier": "DHL", "eta": "2026-12-04"},
          "A-200": {"status": "delayed", "carrier": "UPS", "eta": "2026-12-09"}}
TOOLS: list[dict[str, Any]] = [
    {"name": "order_status", "description": "The shipping status of an order by its id (e.g. A-100).",
     "inputSchema": {"type": "object", "required": ["order_id"],
                     "properties": {"order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"}}}},
    {"name": "word_count", "description": "How many words a text has.",
     "inputSchema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}},
]


def answer(message: Any) -> dict[str, Any] | None:
    """The JSON-RPC answer to one message (None for a notification)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "invalid request"}}
    if "id" not in message:
        return None
    ident, method, params = message["id"], message.get("method"), message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {"tools": {}},
                                  "serverInfo": {"name": "steadyflow-demo", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = call(str(params.get("name")), params.get("arguments") or {})
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"unknown method {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name == "order_status":
        order = ORDERS.get(str(arguments.get("order_id")))
        if order is None:
            return {"isError": True, "content": [{"type": "text", "text": f"no order {arguments.get('order_id')}"}]}
        return {"content": [{"type": "text", "text": json.dumps(order)}], "structuredContent": order}
    if name == "word_count":
        count = len(str(arguments.get("text", "")).split())
        return {"content": [{"type": "text", "text": str(count)}], "structuredContent": {"words": count}}
    return {"isError": True, "content": [{"type": "text", "text": f"unknown tool {name}"}]}


@csrf_exempt
@require_http_methods(["POST"])
def mcp(request: HttpRequest) -> HttpResponse:
    try:
        message = json.loads(request.body or b"null")
    except json.JSONDecodeError:
        return JsonResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}},
                            status=400)
    reply = answer(message)
    if reply is None:
        return HttpResponse(status=202)
    return JsonResponse(reply)
