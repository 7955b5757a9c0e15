"""MCP tools (engine/mcp_client.py, engine/nodes/mcp.py): an llm node's tool and an `mcp` node call a real
local MCP server (tests/support/mcp_server.py, the demo server's protocol) through the real job path
(RQ on the real Redis, claims and commits on the real database; `inprocess.drain`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import chain
from tests.support.mcp_server import McpTestServer
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine.errors import GraphInvalid
from workflows.models import Credential, StepRun, WorkflowInstance
from workflows.scheduler import inprocess

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "mcp-token-0123456789abcdef"


@pytest.fixture
def allow_loopback(settings: Any) -> Iterator[None]:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "HTTP_ALLOWLIST": ["127.0.0.1"]}
    runtime.engine_config.cache_clear()
    yield
    runtime.engine_config.cache_clear()


def server_credential(url: str, name: str = "orders") -> None:
    row = Credential(name=name, kind="mcp_server", base_url=url)
    row.set_value(TOKEN)
    row.save()


def drained(instance: WorkflowInstance) -> WorkflowInstance:
    for _ in range(8):
        inprocess.drain()
        instance.refresh_from_db()
        if instance.status in ("completed", "failed", "halted"):
            break
    return instance


def agent(script: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [{"name": "status", "description": "order status", "parameters": {"type": "object"},
              "target": {"type": "mcp", "server": "orders", "tool": "order_status"}}]
    return {"id": "agent", "type": "llm", "config": {"provider": "scripted", "prompt": "where is A-100?",
                                                     "tools": tools, "script": script}}


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_an_llm_tool_call_goes_to_the_mcp_server_as_a_durable_child_step(redis_conn, allow_loopback, sse) -> None:
    script = [{"text": "", "tool_calls": [{"id": "c1", "name": "status", "args": {"order_id": "A-100"}}]},
              {"text": "It shipped with DHL."}]
    with McpTestServer(token=TOKEN, sse=sse) as server:
        server_credential(server.url)
        instance = drained(runtime.start_instance(save_version(f"mcp-agent-{int(sse)}", chain(agent(script))), {}))
    assert instance.status == "completed", instance.error
    (call,) = server.calls()
    assert call["params"]["name"] == "order_status" and call["params"]["arguments"] == {"order_id": "A-100"}
    tool_step = StepRun.objects.get(instance=instance, node_id="tool:agent:status")
    key = call["params"]["_meta"]["steadyflow/idempotencyKey"]
    assert key == tool_step.idempotency_key
    assert tool_step.output["structured"] == {"status": "shipped", "carrier": "DHL", "eta": "2026-12-04"}
    (recorded,) = StepRun.objects.get(instance=instance, node_id="agent").output["tool_calls"]
    assert "shipped" in str(recorded["result"])
    requests = [r for r in server.requests if r["message"].get("method") == "tools/call"]
    assert requests[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert requests[0]["headers"]["Mcp-Session-Id"] == "session-7f3a"
    assert TOKEN not in str(list(instance.events.values_list("payload", flat=True)))


def test_a_vanished_tool_bad_arguments_and_a_tool_error_are_the_calls_errors(redis_conn, allow_loopback) -> None:
    node = {"id": "ask", "type": "mcp", "config": {"server": "orders", "tool": "order_status",
                                                   "arguments": {"order_id": "{{ input.order }}"}}}
    with McpTestServer(token=TOKEN) as server:
        server_credential(server.url)
        version = save_version("mcp-node", chain(node))
        bad = drained(runtime.start_instance(version, {"order": "not an id"}))
        missing = drained(runtime.start_instance(version, {"order": "Z-999"}))
        ok = drained(runtime.start_instance(version, {"order": "A-200"}))
    assert bad.status == "failed" and "do not match its schema at order_id" in bad.error["message"]
    assert missing.status == "failed" and "MCP tool 'order_status' failed: no order Z-999" in missing.error["message"]
    assert ok.status == "completed"
    assert StepRun.objects.get(instance=ok, node_id="ask").output["structured"]["status"] == "delayed"
    assert len(server.calls()) == 2  # the bad arguments never reached the server

    with McpTestServer(token=TOKEN, hidden=("order_status",)) as server:
        Credential.objects.filter(name="orders").update(base_url=server.url)
        gone = drained(runtime.start_instance(version, {"order": "A-100"}))
    assert gone.status == "failed" and "has no tool 'order_status' (it offers: word_count)" in gone.error["message"]


def test_an_unreachable_or_refusing_server_is_a_clear_step_error(redis_conn, allow_loopback) -> None:
    node = {"id": "ask", "type": "mcp", "retry": {"max_attempts": 1},
            "config": {"server": "orders", "tool": "word_count", "arguments": {"text": "a b c"}}}
    with McpTestServer(token="another-token") as server:
        server_credential(server.url)
        refused = drained(runtime.start_instance(save_version("mcp-refused", chain(node)), {}))
    assert refused.status == "failed" and "MCP server 'orders' answered HTTP 401" in refused.error["message"]
    assert TOKEN not in refused.error["message"]
    unreachable = drained(runtime.start_instance(save_version("mcp-down", chain(node)), {}))
    assert unreachable.status == "failed" and "MCP server 'orders'" in unreachable.error["message"]


def test_save_refuses_a_server_that_is_not_an_mcp_credential(allow_loopback) -> None:
    with pytest.raises(GraphInvalid, match="MCP server credential 'nowhere' does not exist"):
        save_version("mcp-bad", chain({"id": "ask", "type": "mcp", "config": {"server": "nowhere", "tool": "x"}}))
    secret = Credential(name="plain", kind="secret")
    secret.set_value("v")
    secret.save()
    bad = agent([{"text": "x"}])
    bad["config"]["tools"][0]["target"]["server"] = "plain"
    with pytest.raises(GraphInvalid, match="MCP server credential 'plain' is a secret"):
        save_version("mcp-bad-tool", chain(bad))


def test_the_editor_lists_servers_and_their_tools(allow_loopback, client, user_in, roles) -> None:
    with McpTestServer(token=TOKEN, hidden=("word_count",)) as server:
        server_credential(server.url)
        client.force_login(user_in("viewers", "vera"))
        assert client.get("/api/mcp/servers").status_code == 403
        client.force_login(user_in("designers", "dina"))
        assert client.get("/api/mcp/servers").json() == {"servers": [{"name": "orders", "description": ""}]}
        listed = client.get("/api/mcp/servers/orders/tools").json()
    assert [t["name"] for t in listed["tools"]] == ["order_status"]
    assert listed["tools"][0]["target"] == {"type": "mcp", "server": "orders", "tool": "order_status"}
    assert listed["tools"][0]["parameters"]["required"] == ["order_id"]
    assert client.get("/api/mcp/servers/nope/tools").status_code == 404
    down = client.get("/api/mcp/servers/orders/tools")  # the server has stopped
    assert down.status_code == 502 and "MCP server 'orders'" in down.json()["message"]
    assert TOKEN not in down.content.decode()


def test_a_servers_calls_at_once_are_bounded_across_workers(redis_conn, allow_loopback, settings) -> None:
    from workflows.adapters.slots import RedisSlots

    slots = RedisSlots()
    held = [slots.acquire("mcp:orders", 2, hold_s=60) for _ in range(2)]
    assert all(held) and slots.acquire("mcp:orders", 2, hold_s=60) is None
    assert slots.acquire("mcp:other", 2, hold_s=60) is not None  # each server has its own
    lapsing = slots.acquire("mcp:brief", 1, hold_s=0.2)
    assert lapsing and slots.acquire("mcp:brief", 1, hold_s=60) is None
    import time

    time.sleep(0.3)
    assert slots.acquire("mcp:brief", 1, hold_s=60) is not None  # a dead holder's slot lapses

    # This server's own limit (STEADYFLOW_MCP_SERVER_LIMITS) overrides the default of 8.
    settings.STEADYFLOW = {**settings.STEADYFLOW, "MCP_SERVER_LIMITS": {"orders": {"max_concurrent": 2}}}
    runtime.engine_config.cache_clear()
    node = {"id": "ask", "type": "mcp", "config": {"server": "orders", "tool": "word_count",
                                                   "arguments": {"text": "a b"}, "timeout_s": 0.3}}
    with McpTestServer(token=TOKEN) as server:
        server_credential(server.url)
        version = save_version("mcp-busy", chain(node))
        busy = drained(runtime.start_instance(version, {}))
        assert busy.status == "failed"
        assert "MCP server 'orders' is at its limit of 2 call(s) at once" in busy.error["message"]
        assert server.calls() == []
        slots.release("mcp:orders", held[0])
        free = drained(runtime.start_instance(version, {}))
    assert free.status == "completed", free.error
    assert StepRun.objects.get(instance=free, node_id="ask").output["structured"] == {"words": 2}
    # The finished call gave its slot back: one is still held by the test, one is free.
    last = slots.acquire("mcp:orders", 2, hold_s=60)
    assert last is not None
    for token in (held[1], last):
        slots.release("mcp:orders", token)
