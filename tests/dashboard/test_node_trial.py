"""Testing one node from the editor (POST /api/workflows/<slug>/nodes/<id>/test; workflows/authoring/node_trial.py):
designers only, the rendered config with secrets as placeholders, the output, the routing, refused
kinds, pinned samples in the graph, and never an instance, step or event row."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from tests.dashboard.test_editor_api import client_for, graph
from tests.support.llm_server import LLMTestServer
from workflows.authoring.definitions import save_version
from workflows.engine.errors import GraphInvalid
from workflows.models import Credential, Event, StepRun, WorkflowInstance
from workflows.runtime.config import engine_config

pytestmark = pytest.mark.django_db

SECRET = "tok-5ecret-91ab"  # noqa: S105 - a test value
ROUTER = {"id": "pick", "type": "router", "position": {"x": 250, "y": 0},
          "config": {"rules": [{"when": "context.amount > 100", "route": "big"}], "default": "small"}}
BRANCHES = graph(ROUTER, {"id": "big_end", "type": "end"}, edges=[
    {"source": "start", "target": "pick"},
    {"source": "pick", "target": "end", "when": "route == 'small'"},
    {"source": "pick", "target": "big_end", "when": "route == 'big'"},
])


def url(node: str, slug: str = "flow") -> str:
    return f"/api/workflows/{slug}/nodes/{node}/test"


def post(client: Client, node: str, body: dict[str, Any], slug: str = "flow") -> Any:
    return client.post(url(node, slug), data=json.dumps(body), content_type="application/json")


@pytest.fixture
def designer() -> Client:
    return client_for("designers")[0]


@pytest.fixture
def flow() -> None:
    save_version("flow", BRANCHES, name="Flow", message="first")


@pytest.fixture
def no_rows() -> Iterator[None]:
    """Whatever the test did, no instance, step or event row came of it."""
    yield
    assert (WorkflowInstance.objects.count(), StepRun.objects.count(), Event.objects.count()) == (0, 0, 0)


def test_a_router_routes_on_the_sample_and_only_designers_may_test(designer: Client, flow: None,
                                                                    no_rows: None) -> None:
    response = post(designer, "pick", {"sample": {"context": {"amount": 250}}})
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["output"] == {"route": "big"} and answer["error"] is None
    assert [(e["target"], e["fires"]) for e in answer["routing"]] == [("end", False), ("big_end", True)]
    small = post(designer, "pick", {"sample": {"context": {"amount": 3}}}).json()
    assert [(e["target"], e["fires"]) for e in small["routing"]] == [("end", True), ("big_end", False)]
    assert post(client_for("viewers")[0], "pick", {}).status_code == 403
    assert post(client_for("operators")[0], "pick", {}).status_code == 403
    assert Client().post(url("pick"), "{}", content_type="application/json").status_code == 401


def test_the_unsaved_graph_is_tested_and_a_python_node_renders_its_templates(designer: Client, flow: None,
                                                                             no_rows: None) -> None:
    import tests.workflows.functions  # noqa: F401 - registers tests.echo

    echo = {"id": "work", "type": "python", "position": {"x": 1, "y": 1},
            "config": {"function": "tests.echo", "args": {"who": "{{ input.name }}", "n": "{{ steps.prev.n }}",
                                                          "set": {"seen": True}}}}
    unsaved = graph(echo, edges=[{"source": "start", "target": "work"},
                                 {"source": "work", "target": "end", "when": "context.seen and n > 1"}])
    answer = post(designer, "work", {"graph": unsaved, "sample": {"input": {"name": "Ada"},
                                                                   "steps": {"prev": {"n": 2}}}}).json()
    assert answer["config"]["args"] == {"who": "Ada", "n": 2, "set": {"seen": True}}
    assert answer["output"]["who"] == "Ada" and answer["context_updates"] == {"seen": True}
    assert answer["routing"] == [{"index": 1, "target": "end", "when": "context.seen and n > 1", "fires": True}]


def test_refused_kinds_bad_samples_and_unknown_nodes_are_clear_400s(designer: Client, flow: None,
                                                                   no_rows: None) -> None:
    waiting = graph({"id": "nap", "type": "wait", "config": {"seconds": 5}},
                    {"id": "ask", "type": "human", "config": {"prompt": "ok?"}},
                    {"id": "child", "type": "subworkflow", "config": {"workflow": "flow"}})
    for node in ("nap", "ask", "child", "start"):
        response = post(designer, node, {"graph": waiting})
        assert response.status_code == 400, node
        assert "cannot be tested alone" in response.json()["message"]
    assert post(designer, "nowhere", {}).status_code == 404
    bad = post(designer, "pick", {"sample": {"context": [1], "extra": 1}})
    assert bad.status_code == 400
    assert "unknown sample key 'extra'" in bad.json()["message"]
    assert "sample 'context' must be a JSON object" in bad.json()["message"]
    assert "llm nodes only" in post(designer, "pick", {"pinned_response": {"text": "x"}}).json()["message"]
    assert post(designer, "pick", {}, slug="nope").status_code == 404


def test_an_llm_node_takes_a_pinned_response_or_calls_its_provider(designer: Client, no_rows: None) -> None:
    llm = {"id": "ask", "type": "llm", "config": {"provider": "openai", "model": "m", "routes": ["yes", "no"],
                                                  "prompt": "Is {{ context.n }} even?"}}
    body = {"graph": graph(llm, edges=[{"source": "start", "target": "ask"},
                                       {"source": "ask", "target": "end", "when": "route == 'yes'"}]),
            "sample": {"context": {"n": 4}}}
    save_version("flow", body["graph"], message="llm")
    pinned = post(designer, "ask", {**body, "pinned_response": {"text": "yes", "route": "yes"}}).json()
    assert pinned["output"]["text"] == "yes" and pinned["routing"][0]["fires"] is True
    assert pinned["config"]["prompt"] == "Is 4 even?"
    with LLMTestServer(reply="no") as server:
        from django.conf import settings

        old = settings.STEADYFLOW
        settings.STEADYFLOW = {**old, "LLM_BASE_URL": server.url}
        engine_config.cache_clear()
        try:
            real = post(designer, "ask", body).json()
        finally:
            settings.STEADYFLOW = old
            engine_config.cache_clear()
        assert server.requests[0]["messages"][-1]["content"] == "Is 4 even?"
    assert real["output"]["text"] == "no" and real["output"]["route"] == "no"
    assert real["routing"][0]["fires"] is False
    failing = post(designer, "ask", {**body, "pinned_response": {"error": "overloaded"}}).json()
    assert failing["error"]["message"] == "scripted provider error: overloaded" and failing["routing"] == []


def test_an_http_node_calls_out_with_its_secret_and_never_shows_it(designer: Client, settings: Any,
                                                                   no_rows: None) -> None:
    credential = Credential(name="crm_token")
    credential.set_value(SECRET)
    credential.save()
    settings.STEADYFLOW = {**settings.STEADYFLOW, "HTTP_ALLOWLIST": ["127.0.0.1"]}
    engine_config.cache_clear()
    try:
        with LLMTestServer() as server:
            node = {"id": "call", "type": "http",
                    "config": {"url": f"http://127.0.0.1:{server.port}/_stats?t={{{{ secrets.crm_token }}}}",
                               "headers": {"X-Token": "{{ secrets.crm_token }}", "Authorization":
                                           "Bearer {{ secrets.crm_token }}"}}}
            save_version("flow", graph(node), message="http")
            response = post(designer, "call", {})
    finally:
        engine_config.cache_clear()
    text = response.content.decode()
    assert response.status_code == 200, text
    answer = response.json()
    assert answer["error"] is None and answer["output"]["status"] == 200
    assert SECRET not in text
    assert "{{ secrets.crm_token }}" in answer["config"]["url"]
    assert answer["config"]["headers"]["X-Token"] == "***"


def test_a_sample_pinned_to_a_node_is_validated_and_bounded(designer: Client) -> None:
    pinned = {**ROUTER, "sample": {"context": {"amount": 500}}}
    save_version("flow", graph(pinned), message="pinned")  # valid: saved
    for bad, message in (({"context": 1}, "sample 'context' must be a JSON object"),
                         ({"what": {}}, "unknown sample key 'what'"),
                         ({"context": {"blob": "x" * 70_000}}, "64000 at most")):
        with pytest.raises(GraphInvalid) as info:
            save_version("flow", graph({**ROUTER, "sample": bad}), message="bad")
        assert any(message in issue.message and issue.node == "pick" for issue in info.value.issues)
