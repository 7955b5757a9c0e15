"""The planner's prompt and strict reading of the model's reply (workflows/engine/planner.py), and the
validation a proposal goes through: a cyclic plan or one calling an unknown function is refused with the
node named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from workflows.engine import planner
from workflows.engine.nodes import EngineConfig, known_kinds
from workflows.engine.validation import validate_graph

PLAN = {
    "nodes": [{"id": "start", "type": "start"},
              {"id": "clean", "type": "python", "config": {"function": "noop"}},
              {"id": "done", "type": "end"}],
    "edges": [{"source": "start", "target": "clean"}, {"source": "clean", "target": "done"}],
}


def kinds() -> list[planner.KindSummary]:
    return planner.summarize_kinds(k.describe(EngineConfig()) for k in known_kinds().values())


def test_the_prompt_names_kinds_functions_and_the_objective() -> None:
    messages = planner.build_messages("  Triage support mail  ", kinds(),
                                      [{"name": "examples.lookup_order", "doc": "Find an order by number."}],
                                      max_nodes=12)
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    assert "- examples.lookup_order: Find an order by number." in system
    assert "- python (Python function): function;" in system
    assert "- llm (LLM): prompt;" in system and "script" not in system.split("- llm (LLM):")[1].split("\n")[0]
    assert "at most 12 nodes" in system
    # A plan may not plan again or pick a sub-workflow by slug.
    assert "- subworkflow" not in system and "- planner" not in system
    assert messages[1]["content"] == "Objective: Triage support mail"


def test_the_prompt_is_bounded() -> None:
    many = [{"name": f"f{i}", "doc": "x" * 5_000} for i in range(1_000)]
    system = planner.build_messages("do it", kinds(), many)[0]["content"]
    assert system.count("\n- f") == planner.MAX_FUNCTIONS_LISTED
    assert "x" * (planner.MAX_DOC_CHARS + 1) not in system
    with pytest.raises(planner.PlanRejected, match="too long .4001 characters, 4000 at most"):
        planner.build_messages("a" * 4_001, kinds(), [])
    with pytest.raises(planner.PlanRejected, match="empty"):
        planner.build_messages("   ", kinds(), [])
    assert "none registered" in planner.build_messages("x", kinds(), [])[0]["content"]


def test_a_reply_is_parsed_strictly() -> None:
    assert planner.parse_plan(json.dumps(PLAN)) == PLAN
    # One fence is tolerated; extra keys (a model's explanation) are dropped.
    fenced = "```json\n" + json.dumps({**PLAN, "explanation": "because"}) + "\n```"
    assert planner.parse_plan(fenced) == PLAN
    refused = {
        "": "empty",
        "Sure! Here is your graph: {}": "not valid JSON",
        '{"nodes": [], "edges": [], "x": NaN}': "NaN is not a JSON number",
        '{"nodes": [], "edges": [], "x": 1' + "0" * 30 + "}": "out of range",
        "[1, 2]": "not a JSON object",
        '{"nodes": {}}': "'nodes' list and an 'edges' list",
        "[" * 200 + "]" * 200: "nested too deeply",
    }
    for text, fragment in refused.items():
        with pytest.raises(planner.PlanRejected, match=fragment):
            planner.parse_plan(text)
    with pytest.raises(planner.PlanRejected, match="too long"):
        planner.parse_plan("{" + " " * planner.MAX_REPLY_CHARS + "}")


def test_size_and_kind_bounds() -> None:
    with pytest.raises(planner.PlanRejected, match="the plan has 3 nodes, 2 at most"):
        planner.parse_plan(json.dumps(PLAN), max_nodes=2)
    nested = {**PLAN, "nodes": [*PLAN["nodes"], {"id": "again", "type": "planner", "config": {}}]}
    with pytest.raises(planner.PlanRejected, match="node 'again': a plan may not use a planner node"):
        planner.parse_plan(json.dumps(nested))


def issues_of(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [issue.as_dict() for issue in validate_graph(planner.parse_plan(json.dumps(plan)))]


def test_a_cyclic_plan_is_refused_naming_the_node() -> None:
    cyclic = json.loads(json.dumps(PLAN))
    cyclic["nodes"].insert(2, {"id": "again", "type": "python", "config": {"function": "noop"}})
    cyclic["edges"] += [{"source": "clean", "target": "again"}, {"source": "again", "target": "clean"}]
    issues = issues_of(cyclic)
    assert any("unconditional cycle clean -> again -> clean" in i["message"] and i["node"] == "clean"
               for i in issues), issues


def test_an_unknown_function_is_refused_naming_the_node() -> None:
    unknown = json.loads(json.dumps(PLAN))
    unknown["nodes"][1]["config"]["function"] = "os.system"
    issues = issues_of(unknown)
    assert [(i["node"], i["field"]) for i in issues] == [("clean", "config.function")]
    assert "function 'os.system' is not registered" in issues[0]["message"]


def test_usage_is_priced_like_an_llm_node() -> None:
    prices = {"gpt-4o-mini": {"prompt_per_1k": 1.0, "completion_per_1k": 2.0}}
    assert planner.usage_of({"prompt_tokens": 1000, "completion_tokens": 500}, "gpt-4o-mini", prices) == {
        "model": "gpt-4o-mini", "prompt_tokens": 1000, "completion_tokens": 500, "cost_usd": 2.0}
    assert planner.usage_of({"cost_usd": 0.5}, "scripted", {})["cost_usd"] == 0.5
