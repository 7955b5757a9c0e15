"""Planning a graph with an LLM: `POST /api/workflows/<slug>/plan` (the editor's) and
`POST /api/v1/workflows/<slug>/plan`. Designers only; a proposal that does not validate is refused with
the node named; nothing is saved."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.api.conftest import SIMPLE, Api, assert_problem
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import WorkflowVersion

PLAN = {
    "nodes": [{"id": "start", "type": "start"},
              {"id": "lookup", "type": "python", "config": {"function": "examples.lookup_order"}},
              {"id": "done", "type": "end"}],
    "edges": [{"source": "start", "target": "lookup"}, {"source": "lookup", "target": "done"}],
}
USAGE = {"prompt_tokens": 900, "completion_tokens": 120, "cost_usd": 0.0004}


@pytest.fixture(autouse=True)
def _example_functions() -> None:
    import workflows.examples.functions  # noqa: F401 - registers examples.lookup_order


def scripted(plan: Any, objective: str = "Look up an order") -> dict[str, Any]:
    text = plan if isinstance(plan, str) else json.dumps(plan)
    return {"objective": objective, "provider": "scripted", "script": [{"text": text, "usage": USAGE}]}


def session_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, data=json.dumps(body), content_type="application/json")


def test_v1_plan_returns_a_validated_graph_and_saves_nothing(as_role: Any) -> None:
    save_version("orders", SIMPLE)
    response = as_role("designer", "read", "design").post("workflows/orders/plan", scripted(PLAN))
    assert response.status_code == 200, response.content
    assert response.json() == {"graph": PLAN, "issues": [],
                               "usage": {"model": "scripted", "prompt_tokens": 900, "completion_tokens": 120,
                                         "cost_usd": 0.0004}}
    assert WorkflowVersion.objects.filter(definition__slug="orders").count() == 1


def test_v1_plan_refuses_a_bad_proposal_naming_the_node(as_role: Any) -> None:
    save_version("orders", SIMPLE)
    api = as_role("designer", "read", "design")
    cyclic = json.loads(json.dumps(PLAN))
    cyclic["nodes"].insert(2, {"id": "again", "type": "python", "config": {"function": "noop"}})
    cyclic["edges"] += [{"source": "lookup", "target": "again"}, {"source": "again", "target": "lookup"}]
    body = assert_problem(api.post("workflows/orders/plan", scripted(cyclic)), 400, "refused", "cycle")
    assert any(e.get("node") == "lookup" and "cycle" in e["message"] for e in body["errors"]), body
    unknown = json.loads(json.dumps(PLAN))
    unknown["nodes"][1]["config"]["function"] = "os.system"
    body = assert_problem(api.post("workflows/orders/plan", scripted(unknown)), 400, "'os.system' is not registered")
    assert [(e["node"], e["field"]) for e in body["errors"]] == [("lookup", "config.function")]
    assert_problem(api.post("workflows/orders/plan", scripted("I cannot do that.")), 422, "not valid JSON")
    assert_problem(api.post("workflows/orders/plan", {"objective": "x" * 4_001}), 422)
    assert_problem(api.post("workflows/orders/plan", {"objective": "x", "provider": "scripted"}), 400,
                   "needs a 'script'")
    assert_problem(api.post("workflows/orders/plan", {"objective": "x", "credential": "nope"}), 400,
                   "'nope' does not exist")
    assert_problem(api.post("workflows/nope/plan", scripted(PLAN)), 404)


def test_v1_plan_is_for_designers(as_role: Any) -> None:
    save_version("orders", SIMPLE)
    assert_problem(as_role("viewer").post("workflows/orders/plan", scripted(PLAN)), 403)
    assert_problem(as_role("operator").post("workflows/orders/plan", scripted(PLAN)), 403)
    assert_problem(as_role("designer", "read").post("workflows/orders/plan", scripted(PLAN)), 403, "'design' scope")
    assert_problem(Api(Client()).post("workflows/orders/plan", scripted(PLAN)), 401)


def test_editor_plan_endpoint(people: dict[str, User]) -> None:
    save_version("orders", SIMPLE)
    url = "/api/workflows/orders/plan"
    designer = session_for(people["designer"])
    response = post(designer, url, scripted(PLAN))
    assert response.status_code == 200 and response.json()["graph"] == PLAN and "diff" not in response.json()
    # With the canvas's graph, the answer says what the proposal changes (the versions dialog's shape).
    diff = post(designer, url, {**scripted(PLAN), "current": SIMPLE}).json()["diff"]
    assert diff["nodes"]["added"] == ["done", "lookup"] and diff["nodes"]["removed"] == ["end", "nap"]
    cyclic = json.loads(json.dumps(PLAN))
    cyclic["edges"].append({"source": "lookup", "target": "lookup"})
    refused = post(designer, url, scripted(cyclic))
    assert refused.status_code == 400
    body = refused.json()
    assert "refused" in body["message"] and body["graph"] == cyclic
    assert any(e.get("node") == "lookup" for e in body["errors"])
    assert post(designer, url, {"objective": 7}).status_code == 400
    assert post(designer, url, {"objective": "x", "provider": "anthropic"}).json()["message"].startswith(
        "'provider' must be")
    assert designer.post(url, data="[", content_type="application/json").status_code == 400
    assert post(designer, url, scripted(PLAN, objective="y" * 4_001)).json()["message"] == (
        "the objective is too long (4001 characters, 4000 at most)")
    for role, status in (("viewer", 403), ("operator", 403)):
        assert post(session_for(people[role]), url, scripted(PLAN)).status_code == status
    assert post(Client(), url, scripted(PLAN)).status_code == 401
    assert designer.get(url).status_code == 405


def test_a_proposal_keeps_the_declared_input_unless_it_declares_its_own(people: dict[str, User]) -> None:
    save_version("orders", SIMPLE)
    url = "/api/workflows/orders/plan"
    designer = session_for(people["designer"])
    declared = {"type": "object", "required": ["order"], "properties": {"order": {"type": "string"}}}
    answer = post(designer, url, {**scripted(PLAN), "current": {**SIMPLE, "input": declared}}).json()
    assert answer["graph"]["input"] == declared and answer["kept"] == ["input"]
    assert answer["diff"]["input_changed"] is False
    own = {"type": "object", "properties": {"order": {"type": "integer"}, "note": {"type": "string"}}}
    answer = post(designer, url, {**scripted({**PLAN, "input": own}), "current": {**SIMPLE, "input": declared}}).json()
    assert answer["graph"]["input"] == own and "kept" not in answer
    change = answer["diff"]["input"]
    assert change["added"] == [{"name": "note", "type": "string", "required": False}] and change["removed"] == []
    assert change["changed"] == [{"name": "order", "changes": [
        {"path": "type", "before": "string", "after": "integer"},
        {"path": "required", "before": True, "after": False}]}]


def test_plan_with_the_environments_openai_compatible_provider(people: dict[str, User], settings: Any) -> None:
    from tests.support.llm_server import LLMTestServer

    save_version("orders", SIMPLE)
    with LLMTestServer() as server:
        server.configure(reply="```json\n" + json.dumps(PLAN) + "\n```")
        settings.STEADYFLOW = {**settings.STEADYFLOW, "LLM_BASE_URL": server.url, "LLM_DEFAULT_PROVIDER": "openai"}
        runtime.engine_config.cache_clear()
        try:
            response = post(session_for(people["designer"]), "/api/workflows/orders/plan",
                            {"objective": "Look up order 42", "model": "planner-model"})
        finally:
            runtime.engine_config.cache_clear()
        assert response.status_code == 200, response.content
        assert response.json()["graph"] == PLAN and response.json()["usage"]["model"] == "planner-model"
        (sent,) = server.requests
        assert sent["body"]["model"] == "planner-model"
        assert "examples.lookup_order" in sent["body"]["messages"][0]["content"]
        assert sent["body"]["messages"][1]["content"] == "Objective: Look up order 42"


def test_no_configured_provider_is_said_not_called(as_role: Any) -> None:
    save_version("orders", SIMPLE)
    # The test settings configure no key and no base URL: nothing is sent anywhere.
    assert_problem(as_role("designer").post("workflows/orders/plan", {"objective": "x", "provider": "openai"}),
                   400, "no LLM provider is configured")
    assert_problem(as_role("designer").post("workflows/orders/plan", {"objective": "x", "provider": "gpt"}), 422)
