"""The round logic of an llm node's tool calls (engine/nodes/llm_tools.py): planning a round from the
model's calls (argument validation, the round limit), the conversation fed back, checks at save."""

from __future__ import annotations

from typing import Any

import pytest

import workflows.examples.functions  # noqa: F401 - registers examples.search for the save checks
from workflows.engine.errors import PermanentStepError
from workflows.engine.nodes import llm_tools
from workflows.engine.validation import validate_graph

PARAMS = {"type": "object", "required": ["query"], "additionalProperties": False,
          "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "maximum": 5}}}


def config(**extra: Any) -> dict[str, Any]:
    return {"prompt": "p", "tools": [{"name": "search", "parameters": PARAMS,
                                      "target": {"type": "python", "function": "examples.search"}}], **extra}


def test_a_round_keeps_valid_calls_and_turns_bad_ones_into_errors() -> None:
    rnd = llm_tools.plan_round("agent", config(), [], [
        {"id": "a", "name": "search", "args": '{"query": "x", "limit": 2}'},
        {"id": "b", "name": "search", "args": {"limit": 9, "query": "y"}},
        {"id": "c", "name": "search", "args": "{oops"},
        {"id": "d", "name": "fly", "args": {}},
        {"name": "search", "args": ["not", "an", "object"]},
    ], "thinking", {"prompt_tokens": 3})
    calls = rnd["calls"]
    assert rnd["round"] == 1 and rnd["text"] == "thinking"
    assert calls[0] == {"id": "a", "name": "search", "args": {"query": "x", "limit": 2},
                        "arguments": '{"query": "x", "limit": 2}'}
    assert "invalid arguments at limit: 9 is greater than the maximum of 5" in calls[1]["error"]
    assert "not valid JSON" in calls[2]["error"]
    assert calls[3]["error"].startswith("unknown tool 'fly'")
    assert calls[4]["id"] == "call_1_5" and "must be a JSON object" in calls[4]["error"]
    assert not llm_tools.round_done(rnd)


def test_the_round_limit_names_the_node() -> None:
    answered = [{"round": n, "calls": []} for n in (1, 2)]
    with pytest.raises(PermanentStepError, match="node 'agent' reached its limit of 2 tool round"):
        llm_tools.plan_round("agent", config(max_tool_rounds=2), answered, [{"name": "search"}], None, {})
    assert llm_tools.plan_round("agent", config(max_tool_rounds=3), answered,
                                [{"name": "search", "args": {"query": "q"}}], None, {})["round"] == 3


def test_the_conversation_feeds_each_result_back_as_a_tool_message() -> None:
    rounds = [{"round": 1, "text": None, "calls": [
        {"id": "a", "name": "search", "args": {"query": "x"}, "result": {"hits": 2}},
        {"id": "b", "name": "search", "args": {}, "error": "invalid arguments"}]}]
    messages = llm_tools.conversation([{"role": "user", "content": "go"}], rounds)
    assert messages[1]["role"] == "assistant"
    assert messages[1]["tool_calls"][0] == {"id": "a", "type": "function",
                                            "function": {"name": "search", "arguments": '{"query": "x"}'}}
    assert messages[2] == {"role": "tool", "tool_call_id": "a", "content": '{"hits": 2}'}
    assert messages[3] == {"role": "tool", "tool_call_id": "b", "content": '{"error": "invalid arguments"}'}
    assert llm_tools.round_done(rounds[0])


def test_usage_adds_up_over_rounds() -> None:
    rounds = [{"round": 1, "calls": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2, "cost_usd": 0.1}}]
    out = llm_tools.final_output({"text": "t", "usage": {"prompt_tokens": 5, "completion_tokens": 1,
                                                         "cost_usd": 0.05, "model": "m"}}, rounds)
    assert out["usage"] == {"prompt_tokens": 15, "completion_tokens": 3, "cost_usd": 0.15, "model": "m"}
    assert out["tool_rounds"] == 1


def agent_graph(tools: list[dict[str, Any]], node_id: str = "agent") -> dict[str, Any]:
    return {"nodes": [{"id": "start", "type": "start"},
                      {"id": node_id, "type": "llm",
                       "config": {"provider": "scripted", "prompt": "p", "script": [{"text": "t"}], "tools": tools}},
                      {"id": "end", "type": "end"}],
            "edges": [{"source": "start", "target": node_id}, {"source": node_id, "target": "end"}]}


def test_save_checks_name_the_node_and_the_tool() -> None:
    py = {"type": "python", "function": "examples.search"}
    issues = [i.message for i in validate_graph(agent_graph([
        {"name": "search", "target": py},
        {"name": "search", "target": py},
        {"name": "ghost", "target": {"type": "python", "function": "nope.never"}},
        {"name": "schema", "parameters": {"type": "nonsense"}, "target": py},
        {"name": "web", "target": {"type": "http", "config": {"method": "BREW"}}},
    ]))]
    assert any("node 'agent', tool 'search': the name is used by another tool" in m for m in issues)
    assert any("node 'agent', tool 'ghost': function 'nope.never' is not registered" in m for m in issues)
    assert any("node 'agent', tool 'schema': parameters is not a valid JSON Schema" in m for m in issues)
    assert any("node 'agent', tool 'web': http target:" in m for m in issues)
    assert validate_graph(agent_graph([{"name": "search", "target": py}])) == []
    long_id = "a" * 50
    assert any("at most" in i.message for i in validate_graph(agent_graph([{"name": "search" * 3, "target": py}],
                                                                          node_id=long_id)))


def test_the_llm_node_returns_a_round_then_the_final_answer_with_every_call() -> None:
    import asyncio

    from tests.engine.conftest import make_call
    from workflows.engine.nodes import get_kind

    script = [{"text": "looking", "tool_calls": [{"id": "a", "name": "search", "args": {"query": "x"}}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 1, "cost_usd": 0.01}},
              {"text": "answer", "usage": {"prompt_tokens": 20, "completion_tokens": 2, "cost_usd": 0.02}}]
    node_config = {**config(), "provider": "scripted", "script": script}
    first = asyncio.run(get_kind("llm").arun(make_call("llm", node_config, node_id="agent")))
    assert first.tool_round is not None and first.tool_round["calls"][0]["args"] == {"query": "x"}
    assert first.output["waiting_for_tools"] is True and first.usage["prompt_tokens"] == 10

    answered = [{**first.tool_round, "calls": [{**first.tool_round["calls"][0], "result": {"hits": 1}}]}]
    call = make_call("llm", node_config, node_id="agent", call_index=1)
    call.tool_rounds = answered
    final = asyncio.run(get_kind("llm").arun(call))
    assert final.tool_round is None and final.output["text"] == "answer"
    assert final.output["tool_calls"] == [{"round": 1, "id": "a", "name": "search", "args": {"query": "x"},
                                           "result": {"hits": 1}}]
    assert final.usage is not None and final.usage["prompt_tokens"] == 30
    assert final.usage["cost_usd"] == pytest.approx(0.03)
