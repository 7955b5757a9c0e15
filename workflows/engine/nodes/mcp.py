"""An MCP tool call: one tool of an MCP server (engine/mcp_client.py), as a node or as an llm node's tool.

The server is a credential of kind `mcp_server` (its URL, and a bearer token as its value), named in
`server` — never a template, so the node always goes where the graph says. Each call lists the
server's tools first: a tool that vanished, or arguments that do not match the schema the server
declares for it, fail the step permanently, naming the problem. A result the server marks as an error
(`isError`) fails the step permanently with its text: as an llm tool call, that text is what the model
reads back as the call's error.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import jsonschema

from workflows.engine import limits, mcp_client, outbound
from workflows.engine.errors import ConfigError, PermanentStepError, StepError
from workflows.engine.nodes.base import NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register

MAX_ERROR_CHARS = 500


@register
class Mcp(NodeKind):
    name = "mcp"
    default_queue = "io"
    label = "MCP tool"
    icon = "⚙"
    color = "#4f46e5"
    # The server is a credential's name, never rendered from data.
    raw_config_keys = frozenset({"server"})
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["server", "tool"],
        "additionalProperties": False,
        "properties": {
            "server": {"type": "string", "minLength": 1, "maxLength": 64, "title": "MCP server (credential)"},
            "tool": {"type": "string", "minLength": 1, "maxLength": 128, "title": "Tool"},
            "arguments": {"type": "object", "title": "Arguments (templates allowed)"},
            "timeout_s": limits.number(None, limits.MAX_STEP_TIMEOUT_S, exclusive_minimum=0,
                                       title="Call timeout (s)"),
        },
    }

    def run(self, call: StepCall) -> NodeResult:
        config = call.config
        server = call.provider
        if server is None:
            raise ConfigError(f"node '{call.node.id}': MCP server credential '{config.get('server')}' is not set")
        limit, server_timeout_s = call.engine.mcp_limits(server.name)
        timeout_s = float(config.get("timeout_s") or call.node.timeout_s or server_timeout_s)
        slot = self._slot(call, server.name, limit, timeout_s)
        try:
            return self._call(call, server, timeout_s)
        finally:
            if slot is not None and call.slots is not None:
                call.slots.release(f"mcp:{server.name}", slot)

    def _slot(self, call: StepCall, name: str, limit: int, timeout_s: float) -> str | None:
        """One of the server's `limit` slots, waited for within the call's deadline; a server at its
        limit past that is a retryable step error naming it."""
        if call.slots is None:
            return None
        deadline = time.monotonic() + timeout_s
        pause = 0.02
        while True:
            # A slot is held at most for the requests' deadlines (initialize, list, call) plus a margin.
            token = call.slots.acquire(f"mcp:{name}", limit, hold_s=3 * timeout_s + 5)
            if token is not None:
                return token
            if time.monotonic() + pause > deadline:
                raise StepError(f"MCP server '{name}' is at its limit of {limit} call(s) at once "
                                "(STEADYFLOW_MCP_MAX_PER_SERVER, STEADYFLOW_MCP_SERVER_LIMITS)",
                                details={"server": name})
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _call(self, call: StepCall, server: Any, timeout_s: float) -> NodeResult:
        config = call.config
        session = mcp_client.McpSession(
            server.name, server.base_url, server.api_key,
            policy=outbound.Policy(allowlist=tuple(call.engine.http_allowlist)),
            timeout_s=timeout_s, idempotency_key=call.idempotency_key)
        session.initialize()
        tool_name = str(config["tool"])
        offered = {str(t["name"]): t for t in session.list_tools()}
        tool = offered.get(tool_name)
        if tool is None:
            choices = ", ".join(sorted(offered)) or "none"
            raise PermanentStepError(
                f"MCP server '{server.name}' has no tool '{tool_name}' (it offers: {choices})",
                details={"server": server.name, "tool": tool_name})
        arguments = config.get("arguments") or {}
        schema = tool.get("inputSchema")
        if isinstance(schema, dict):
            problem = next(iter(jsonschema.Draft202012Validator(schema).iter_errors(arguments)), None)
            if problem is not None:
                where = "/".join(str(p) for p in problem.absolute_path) or "(the arguments)"
                raise PermanentStepError(
                    f"arguments for MCP tool '{tool_name}' do not match its schema at {where}: {problem.message}",
                    details={"server": server.name, "tool": tool_name})
        result = session.call_tool(tool_name, arguments)
        text = mcp_client.result_text(result)
        if result.get("isError"):
            raise PermanentStepError(f"MCP tool '{tool_name}' failed: {text[:MAX_ERROR_CHARS] or 'no message'}",
                                     details={"server": server.name, "tool": tool_name})
        output: dict[str, Any] = {"text": text, "content": result.get("content") or []}
        if isinstance(result.get("structuredContent"), dict):
            output["structured"] = result["structuredContent"]
        scope = call.secrets
        return NodeResult(output=scope.scrub(output) if scope is not None else output)
