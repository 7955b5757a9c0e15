"""The editor's MCP tool picker in a real browser (static/js/editor/mcp-picker.js): a designer chooses an
MCP server credential, sees the tools it offers (listed by the server itself, tests/support/mcp_server.py)
and adds one to an llm node's tools; the graph then saves and validates."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_editor import click_node, graph, open_editor
from tests.support.mcp_server import McpTestServer

pytestmark = [pytest.mark.e2e]

GRAPH = {
    "nodes": [
        {"id": "start", "type": "start", "position": {"x": 80, "y": 200}},
        {"id": "agent", "type": "llm", "position": {"x": 300, "y": 200},
         "config": {"provider": "scripted", "prompt": "Where is my order?", "script": [{"text": "on its way"}]}},
        {"id": "end", "type": "end", "position": {"x": 520, "y": 200}},
    ],
    "edges": [{"source": "start", "target": "agent"}, {"source": "agent", "target": "end"}],
}


@pytest.fixture
def mcp_server(settings: Any) -> Iterator[McpTestServer]:
    from workflows import runtime
    from workflows.models import Credential

    settings.STEADYFLOW = {**settings.STEADYFLOW, "HTTP_ALLOWLIST": ["127.0.0.1"]}
    runtime.engine_config.cache_clear()
    with McpTestServer(token="picker-token-0123456789") as server:
        row = Credential(name="orders", kind="mcp_server", base_url=server.url)
        row.set_value("picker-token-0123456789")
        row.save()
        yield server
    runtime.engine_config.cache_clear()


def test_a_designer_adds_an_mcp_tool_to_an_llm_node(page: Any, make_user: Any, login: Any,
                                                     mcp_server: McpTestServer) -> None:
    from workflows.authoring.definitions import save_version

    save_version("desk", GRAPH, name="Desk", message="first")
    login(page, make_user("dana", "designers"))
    open_editor(page, "/workflows/desk/edit/")
    click_node(page, "agent")
    page.click(".mcp-picker summary")
    page.select_option(".mcp-server", "orders")
    page.click(".mcp-tools button[data-tool='order_status']")
    assert "Added order_status." in page.locator(".mcp-picker [role=status]").inner_text()
    tools = graph(page)["nodes_by_id"]["agent"]["config"]["tools"]
    assert [(t["name"], t["target"]) for t in tools] == [
        ("order_status", {"type": "mcp", "server": "orders", "tool": "order_status"})]
    assert tools[0]["parameters"]["required"] == ["order_id"]
    # Picking it again replaces it rather than adding a second.
    page.click(".mcp-tools button[data-tool='order_status']")
    assert len(graph(page)["nodes_by_id"]["agent"]["config"]["tools"]) == 1
    listed = [r for r in mcp_server.requests if r["message"].get("method") == "tools/list"]
    assert listed and listed[0]["headers"]["Authorization"] == "Bearer picker-token-0123456789"
    assert "picker-token" not in page.content()
