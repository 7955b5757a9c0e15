"""The subworkflow node without a database: a fake `Subflows` port stands in for the runtime."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.engine.conftest import graph, make_call
from workflows.engine.errors import PermanentStepError
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import ChildRun
from workflows.engine.validation import validate_graph


class FakeSubflows:
    def __init__(self, depth: int = 0, status: str = "running", context: dict[str, Any] | None = None) -> None:
        self.depth = depth
        self.status = status
        self.context = context or {}
        self.started: list[tuple[str, int | None, dict[str, Any]]] = []

    def child(self, workflow: str, version: int | None, start_input: dict[str, Any]) -> ChildRun:
        self.started.append((workflow, version, start_input))
        return ChildRun(id=41, workflow=workflow, version=version or 3, status=self.status, depth=self.depth + 1,
                        context=self.context, tokens=120, cost_usd=0.25)


def run(config: dict[str, Any], port: FakeSubflows, context: dict[str, Any] | None = None) -> Any:
    call = dataclasses.replace(make_call("subworkflow", config, node_id="sub", context=context), subflows=port)
    return get_kind("subworkflow").run(call)


def test_a_running_child_parks_the_step_on_it() -> None:
    port = FakeSubflows()
    result = run({"workflow": "child", "version": 2, "input": {"q": "hi"}}, port)
    assert result.waiting_on == 41 and result.output is None
    assert port.started == [("child", 2, {"q": "hi"})]


def test_a_completed_child_gives_its_final_context_or_the_mapped_output_and_its_usage() -> None:
    port = FakeSubflows(status="completed", context={"answer": 42, "noise": "x"})
    whole = run({"workflow": "child"}, port)
    assert whole.waiting_on is None and whole.output == {"answer": 42, "noise": "x"}
    assert whole.usage == {"tokens": 120, "cost_usd": 0.25, "model": "subworkflow:child", "child": 41}
    mapped = run({"workflow": "child", "output": {"a": "{{ child.output.answer }}", "id": "{{ child.id }}"},
                  "save_as": "result"}, port)
    assert mapped.output == {"a": 42, "id": 41}
    assert mapped.context_updates == {"result": {"a": 42, "id": 41}}


def test_a_start_past_max_depth_fails_for_good_naming_the_depth() -> None:
    port = FakeSubflows(depth=5)
    with pytest.raises(PermanentStepError, match="nest sub-workflows 6 levels deep, past max_depth 5") as caught:
        run({"workflow": "child"}, port)
    assert caught.value.details == {"depth": 6, "max_depth": 5}
    assert port.started == []
    with pytest.raises(PermanentStepError, match="2 levels deep, past max_depth 1"):
        run({"workflow": "child", "max_depth": 1}, FakeSubflows(depth=1))


def test_without_a_runtime_the_node_refuses_to_run() -> None:
    with pytest.raises(PermanentStepError, match="only on a worker"):
        get_kind("subworkflow").run(make_call("subworkflow", {"workflow": "child"}))


def test_the_config_schema_is_checked_at_validation_naming_the_node() -> None:
    def issues(config: dict[str, Any]) -> list[dict[str, Any]]:
        data = graph(["start:start", {"id": "sub", "type": "subworkflow", "config": config}, "end:end"],
                     [("start", "sub"), ("sub", "end")])
        return [i.as_dict() for i in validate_graph(data)]

    assert issues({"workflow": "child", "input": {"q": "{{ context.q }}"}, "max_depth": 3}) == []
    on_ai = graph(["start:start", {"id": "sub", "type": "subworkflow", "queue": "ai", "config": {"workflow": "c"}},
                   "end:end"], [("start", "sub"), ("sub", "end")])
    assert [i.as_dict() for i in validate_graph(on_ai)] == [{
        "message": "node 'sub': a sub-workflow runs on the default or io queue, not ai", "node": "sub",
        "field": "queue"}]
    for bad in ({}, {"workflow": ""}, {"workflow": "c", "max_depth": 11}, {"workflow": "c", "version": 0},
                {"workflow": "c", "input": "x"}, {"workflow": "c", "extra": 1}):
        found = issues(bad)
        assert found and all(i.get("node") == "sub" for i in found), (bad, found)
