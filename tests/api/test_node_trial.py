"""Testing one node through the v1 API: `POST /api/v1/workflows/<slug>/nodes/<id>/test`, the token
clients' way to the editor's *Test node* (workflows/authoring/node_trial.py; the session endpoint's own tests are
tests/dashboard/test_node_trial.py). Designers with the `design` scope only; problems name what is
wrong; a node's pinned sample is used when the request brings none; nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.conftest import assert_problem
from workflows.authoring.definitions import save_version
from workflows.models import Event, StepRun, WorkflowInstance

ROUTER = {"id": "pick", "type": "router",
          "config": {"rules": [{"when": "context.amount > 100", "route": "big"}], "default": "small"}}
ASK = {"id": "ask", "type": "llm", "config": {"provider": "openai", "model": "m", "routes": ["yes", "no"],
                                              "prompt": "Is {{ context.n }} even?"},
       "sample": {"context": {"n": 4}, "pinned_response": {"text": "yes", "route": "yes"}}}
GRAPH = {
    "nodes": [{"id": "start", "type": "start"}, ROUTER, ASK, {"id": "end", "type": "end"},
              {"id": "big_end", "type": "end"}],
    "edges": [{"source": "start", "target": "pick"},
              {"source": "pick", "target": "ask", "when": "route == 'small'"},
              {"source": "pick", "target": "big_end", "when": "route == 'big'"},
              {"source": "ask", "target": "end", "when": "route == 'yes'"},
              {"source": "ask", "target": "big_end", "when": "route == 'no'"}],
}


@pytest.fixture
def flow(db: None) -> Iterator[None]:
    """A saved workflow, and after the test: no instance, step or event row came of it."""
    save_version("flow", GRAPH, name="Flow", message="first")
    yield
    assert (WorkflowInstance.objects.count(), StepRun.objects.count(), Event.objects.count()) == (0, 0, 0)


def url(node: str, slug: str = "flow") -> str:
    return f"workflows/{slug}/nodes/{node}/test"


def test_a_designer_tests_a_router_of_the_latest_version(as_role: Any, flow: None) -> None:
    api = as_role("designer", "read", "design")
    response = api.post(url("pick"), {"sample": {"context": {"amount": 250}}})
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["node"] == "pick" and answer["type"] == "router" and answer["error"] is None
    assert answer["output"] == {"route": "big"}
    assert [(e["target"], e["fires"]) for e in answer["routing"]] == [("ask", False), ("big_end", True)]
    small = api.post(url("pick"), {"sample": {"context": {"amount": 3}}}).json()
    assert [(e["target"], e["fires"]) for e in small["routing"]] == [("ask", True), ("big_end", False)]


def test_the_nodes_pinned_sample_and_response_are_used_when_the_request_has_none(as_role: Any,
                                                                                 flow: None) -> None:
    api = as_role("designer", "read", "design")
    pinned = api.post(url("ask")).json()
    assert pinned["config"]["prompt"] == "Is 4 even?", pinned
    assert pinned["output"]["text"] == "yes" and pinned["error"] is None
    assert [(e["target"], e["fires"]) for e in pinned["routing"]] == [("end", True), ("big_end", False)]
    # A sample of the request's own replaces the pinned one; a pinned response of its own too.
    mine = api.post(url("ask"), {"sample": {"context": {"n": 7}},
                                 "pinned_response": {"text": "no", "route": "no"}}).json()
    assert mine["config"]["prompt"] == "Is 7 even?" and mine["output"]["route"] == "no"
    failing = api.post(url("ask"), {"pinned_response": {"error": "overloaded"}}).json()
    assert failing["error"]["message"] == "scripted provider error: overloaded" and failing["routing"] == []


def test_an_unsaved_graph_is_tested_without_saving_it(as_role: Any, flow: None) -> None:
    changed = {**GRAPH, "nodes": [{**ROUTER, "config": {"rules": [], "default": "big"}}
                                  if n["id"] == "pick" else n for n in GRAPH["nodes"]]}
    answer = as_role("designer", "read", "design").post(url("pick"), {"graph": changed}).json()
    assert answer["output"] == {"route": "big"}
    from workflows.models import WorkflowVersion

    assert WorkflowVersion.objects.filter(definition__slug="flow").count() == 1


def test_refusals_are_problems_that_say_why(as_role: Any, flow: None) -> None:
    api = as_role("designer", "read", "design")
    assert_problem(api.post(url("nowhere")), 404, "no node 'nowhere'")
    assert_problem(api.post(url("pick", slug="nope")), 404)
    assert_problem(api.post(url("end")), 400, "cannot be tested alone")
    bad = assert_problem(api.post(url("pick"), {"sample": {"context": {}, "extra": 1}}), 400,
                         "unknown sample key 'extra'")
    assert bad["type"] == "urn:steadyflow:problem:bad-request"
    assert_problem(api.post(url("pick"), {"pinned_response": {"text": "x"}}), 400, "llm nodes only")
    assert_problem(api.post(url("pick"), {"sample": [1]}), 422, "body.sample")
    broken = {**GRAPH, "nodes": [{**ROUTER, "config": {"default": 3}} if n["id"] == "pick" else n
                                 for n in GRAPH["nodes"]]}
    invalid = assert_problem(api.post(url("pick"), {"graph": broken}), 400, "node 'pick' is invalid")
    assert invalid["errors"] and all(error["node"] == "pick" for error in invalid["errors"])
    save_version("empty-one", GRAPH)
    from workflows.models import WorkflowDefinition

    WorkflowDefinition.objects.create(slug="unsaved", name="Unsaved")
    assert_problem(api.post(url("pick", slug="unsaved")), 404, "no saved version")


def test_only_designers_with_the_design_scope_may_test(as_role: Any, flow: None) -> None:
    assert_problem(as_role("designer", "read").post(url("pick")), 403, "design")
    assert_problem(as_role("viewer").post(url("pick")), 403)
    assert_problem(as_role("operator").post(url("pick")), 403)
    assert as_role("superuser").post(url("pick")).status_code == 200
    from django.test import Client

    assert_problem(Client().post("/api/v1/" + url("pick"), "{}", content_type="application/json"), 401)
