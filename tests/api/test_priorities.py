"""v1: a start's priority (one or many), shown on the instance; an unknown one refused naming the field."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import SIMPLE, assert_problem
from workflows.authoring.definitions import save_version
from workflows.models import StepRun, WorkflowInstance


def test_start_and_start_many_take_a_priority(as_role: Any) -> None:
    save_version("simple", SIMPLE)
    api = as_role("operator")
    one = api.post("workflows/simple/instances", {"input": {}, "priority": "high"})
    assert one.status_code == 201, one.content
    assert one.json()["priority"] == "high"
    assert api.get(f"instances/{one.json()['id']}").json()["priority"] == "high"
    many = api.post("workflows/simple/instances/bulk", {"inputs": [{}, {}], "priority": "low"})
    assert [i["priority"] for i in many.json()["instances"]] == ["low", "low"]
    assert api.post("workflows/simple/instances", {}).json()["priority"] == "normal"
    assert set(StepRun.objects.exclude(node_id="start").values_list("instance__priority", "priority")) <= {
        ("high", "high"), ("low", "low"), ("normal", "normal")}


def test_an_unknown_priority_is_refused_naming_the_field(as_role: Any) -> None:
    save_version("simple", SIMPLE)
    api = as_role("operator")
    for url, body in (("workflows/simple/instances", {"priority": "urgent"}),
                      ("workflows/simple/instances/bulk", {"inputs": [{}], "priority": 1})):
        problem = assert_problem(api.post(url, body), 422)
        assert [e["field"] for e in problem["errors"]] == ["body.priority"], problem
    assert WorkflowInstance.objects.count() == 0
