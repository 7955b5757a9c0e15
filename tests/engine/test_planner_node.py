"""The planner node's handler with a fake Subflows port (no database): it plans once, bounds the plan
by the parent, refuses a plan outside its allow-list naming the node, reuses a recorded plan without
calling the model, and maps a completed child into its output and usage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.engine.conftest import make_call
from workflows.engine.errors import PermanentStepError
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import ChildRun, RecordedPlan
from workflows.engine.nodes.planner import bounded
from workflows.engine.validation import validate_graph

PLAN = {"nodes": [{"id": "start", "type": "start"},
                  {"id": "tidy", "type": "python", "config": {"function": "noop"}},
                  {"id": "done", "type": "end"}],
        "edges": [{"source": "start", "target": "tidy"}, {"source": "tidy", "target": "done"}],
        "settings": {"max_transitions": 500, "budget_usd": 5}}
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.001}


@dataclass
class FakeSubflows:
    depth: int = 0
    status: str = "running"
    recorded: RecordedPlan | None = None
    left: dict[str, Any] = field(default_factory=lambda: {"budget_usd": 0.25, "budget_tokens": None,
                                                          "max_transitions": 40})
    started: list[tuple[str, int | None, dict[str, Any]]] = field(default_factory=list)

    def remaining(self) -> dict[str, Any]:
        return self.left

    def recorded_plan(self) -> RecordedPlan | None:
        return self.recorded

    def record_plan(self, graph: dict[str, Any], usage: dict[str, Any], objective: str) -> RecordedPlan:
        issues = validate_graph(graph)
        if issues:
            raise PermanentStepError(f"refused: {issues[0]}")
        self.recorded = RecordedPlan("p--plan-n", 1, graph, usage)
        return self.recorded

    def child(self, workflow: str, version: int | None, start_input: dict[str, Any]) -> ChildRun:
        self.started.append((workflow, version, start_input))
        return ChildRun(id=9, workflow=workflow, version=version or 1, status=self.status, depth=self.depth + 1,
                        context={"done": True}, tokens=30, cost_usd=0.002)


def call_with(port: FakeSubflows, **config: Any) -> Any:
    base = {"objective": "tidy up", "provider": "scripted", "script": [{"text": json.dumps(PLAN), "usage": USAGE}],
            "input": {"x": 1}}
    call = make_call("planner", {**base, **config})
    call.subflows = port
    return call


def test_plans_records_and_waits_on_its_child_then_maps_the_result() -> None:
    port = FakeSubflows()
    result = get_kind("planner").run(call_with(port))
    assert result.waiting_on == 9 and port.started == [("p--plan-n", 1, {"x": 1})]
    assert port.recorded is not None
    # Bounded by the parent: its remaining budget and transitions, not the model's wishes.
    assert port.recorded.graph["settings"] == {"max_transitions": 40, "budget_usd": 0.25}
    assert port.recorded.usage == {"model": "scripted", "prompt_tokens": 100, "completion_tokens": 20,
                                   "cost_usd": 0.001}
    port.status = "completed"
    # The step runs again when the child completes: the recorded plan, no model call (a script that
    # would fail if asked proves it).
    done = get_kind("planner").run(call_with(port, script=[{"error": "asked twice", "permanent": True}],
                                             save_as="out"))
    assert done.waiting_on is None and done.context_updates == {"out": {"done": True}}
    assert done.output["plan"]["nodes"] == PLAN["nodes"] and done.output["child"] == 9
    assert done.output["validation"] == {"valid": True, "issues": []}
    assert done.usage == {"tokens": 150, "cost_usd": 0.003, "model": "planner:scripted", "child": 9}


def test_an_allow_list_refuses_other_functions_naming_the_node() -> None:
    with pytest.raises(PermanentStepError, match="node 'n': the plan was refused: node 'tidy' calls 'noop', not one "
                                                 "of the allowed functions .examples.lookup_order."):
        get_kind("planner").run(call_with(FakeSubflows(), allowed_functions=["examples.lookup_order"]))


def test_a_reply_that_is_no_plan_or_too_big_is_refused() -> None:
    with pytest.raises(PermanentStepError, match="node 'n': the plan was refused: the model's reply is not valid"):
        get_kind("planner").run(call_with(FakeSubflows(), script=[{"text": "I would start with..."}]))
    with pytest.raises(PermanentStepError, match="the plan has 3 nodes, 2 at most"):
        get_kind("planner").run(call_with(FakeSubflows(), max_nodes=2))
    cyclic = {**PLAN, "edges": [*PLAN["edges"], {"source": "tidy", "target": "tidy"}]}
    with pytest.raises(PermanentStepError, match="unconditional cycle tidy -> tidy"):
        get_kind("planner").run(call_with(FakeSubflows(), script=[{"text": json.dumps(cyclic)}]))


def test_depth_and_a_missing_port_fail_for_good() -> None:
    with pytest.raises(PermanentStepError, match="nest sub-workflows 3 levels deep, past max_depth 2"):
        get_kind("planner").run(call_with(FakeSubflows(depth=2), max_depth=2))
    with pytest.raises(PermanentStepError, match="runs only on a worker"):
        get_kind("planner").run(make_call("planner", {"objective": "x"}))


def test_the_schema_bounds_max_nodes_and_bounded_settings() -> None:
    schema = get_kind("planner").config_schema["properties"]
    assert schema["max_nodes"]["maximum"] == 50
    assert bounded(None, {"budget_usd": None, "budget_tokens": 500, "max_transitions": 0}) == {
        "budget_tokens": 500, "max_transitions": 1}
    assert bounded({"budget_tokens": 10}, {"budget_tokens": 500}) == {"budget_tokens": 10}
