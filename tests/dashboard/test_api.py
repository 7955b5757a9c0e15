"""The JSON API through Django's test client: every answer, errors included, is JSON; errors carry a
`message`. One test at the end runs a started instance on a real worker and reads it back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from tests.conftest import chain
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import WorkflowDefinition, WorkflowInstance

GRAPH = chain({"id": "work", "type": "python", "config": {"function": "noop"}})
START = "/api/workflows/{slug}/instances"


def user_with(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, password="pw-123456")
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="workflows",
                                                         codename__in=codenames))
    return user


def client_for(user: User | None, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def operator(db: None) -> Client:
    return client_for(user_with("olga", "add_workflowinstance", "view_workflowinstance"))


@pytest.fixture
def viewer(db: None) -> Client:
    return client_for(user_with("victor", "view_workflowinstance"))


@pytest.fixture
def reader(db: None) -> Client:
    """May read graphs (node types, validation) and nothing else."""
    return client_for(user_with("rita", "view_workflowdefinition"))


@pytest.fixture
def nobody(db: None) -> Client:
    return client_for(user_with("nadia"))


@pytest.fixture
def anonymous(db: None) -> Client:
    return Client()


@pytest.fixture
def flow(db: None) -> Any:
    return save_version("api-flow", GRAPH)


def post_json(client: Client, url: str, body: Any, **headers: str) -> Any:
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(url, data=data, content_type="application/json", headers=headers)


def assert_error(response: Any, status: int, text: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json", response.content[:300]
    body = response.json()
    assert text in body["message"], body
    return body


# --- Node types and validation ----------------------------------------------------------------------

def test_node_types_lists_every_kind_with_its_schema(reader):
    response = reader.get("/api/node-types")
    assert response.status_code == 200
    kinds = {kind["name"]: kind for kind in response.json()["node_types"]}
    assert {"start", "end", "llm", "router", "http", "python", "human", "wait"} <= set(kinds)
    assert kinds["http"]["default_queue"] == "io"
    assert kinds["llm"]["default_queue"] == "ai"
    assert kinds["python"]["schema"]["required"] == ["function"]
    assert kinds["start"]["structural"] is True
    # What the editor's panel offers per kind: retries where a worker runs the step, the circuit
    # fallback on llm nodes only.
    assert [k for k in ("llm", "http", "python", "wait", "human") if kinds[k]["retries"]] == ["llm", "http", "python"]
    assert [k for k, kind in kinds.items() if kind["circuit_fallback"]] == ["llm"]


@pytest.mark.parametrize(("configured", "default"), [({}, "scripted"), ({"LLM_DEFAULT_PROVIDER": "openai"}, "openai")])
def test_node_types_serves_the_effective_llm_provider_default(reader, settings, configured, default):
    runtime.engine_config.cache_clear()
    settings.STEADYFLOW = {**settings.STEADYFLOW, **configured}
    try:
        kinds = {kind["name"]: kind for kind in reader.get("/api/node-types").json()["node_types"]}
    finally:
        runtime.engine_config.cache_clear()
    assert kinds["llm"]["schema"]["properties"]["provider"]["default"] == default


def test_functions_lists_registered_functions_with_their_docstrings(anonymous, nobody):
    viewer = client_for(user_with("vera", "view_workflowdefinition"))  # what the viewers group holds
    response = viewer.get("/api/functions")
    assert response.status_code == 200
    functions = {f["name"]: f["doc"] for f in response.json()["functions"]}
    assert functions["examples.lookup_order"] == ("A tool the ReAct agent calls: looks up the order the LLM "
                                                   "asked for.")
    assert "noop" in functions  # the tests' own module registers it
    assert list(functions) == sorted(functions)
    assert_error(anonymous.get("/api/functions"), 401, "authentication required")
    assert_error(nobody.get("/api/functions"), 403, "workflows.view_workflowdefinition")
    assert_error(viewer.post("/api/functions"), 405, "method POST not allowed")


def test_node_types_refuses_anonymous_and_other_methods(anonymous, nobody):
    assert_error(anonymous.get("/api/node-types"), 401, "authentication required")
    body = assert_error(nobody.post("/api/node-types"), 405, "method POST not allowed")
    assert "use GET" in body["message"]


def test_validate_accepts_a_valid_graph_bare_or_wrapped(reader):
    for body in (GRAPH, {"graph": GRAPH}):
        response = post_json(reader, "/api/validate", body)
        assert response.status_code == 200
        assert response.json() == {"valid": True, "errors": []}


def test_validate_reports_each_error_shape(reader):
    node_error = chain({"id": "fetch", "type": "http", "config": {"method": "GET"}})
    body = post_json(reader, "/api/validate", node_error).json()
    assert body["valid"] is False
    assert body["errors"] == [{"message": "node 'fetch': config: 'url' is a required property",
                               "node": "fetch", "field": "config"}]

    edge_error = chain({"id": "a", "type": "python", "config": {"function": "noop"}})
    edge_error["edges"][1]["when"] = "route =="
    (issue,) = post_json(reader, "/api/validate", edge_error).json()["errors"]
    assert issue["edge"] == 1 and issue["field"] == "when" and "node" not in issue
    assert issue["message"].startswith("edge 2 (a -> end): condition does not parse")

    cycle = {"nodes": [{"id": "start", "type": "start"}, {"id": "a", "type": "python", "config": {"function": "noop"}},
                       {"id": "b", "type": "python", "config": {"function": "noop"}}, {"id": "end", "type": "end"}],
             "edges": [{"source": "start", "target": "a"}, {"source": "a", "target": "b"},
                       {"source": "b", "target": "a"}, {"source": "b", "target": "end"}]}
    (issue,) = post_json(reader, "/api/validate", cycle).json()["errors"]
    assert issue["node"] == "a" and issue["message"].startswith("unconditional cycle a -> b -> a")

    graph_level = {"nodes": [{"id": "end", "type": "end"}], "edges": []}
    (issue,) = post_json(reader, "/api/validate", graph_level).json()["errors"]
    assert issue == {"message": "the graph needs exactly one start node (found none)"}

    (issue,) = post_json(reader, "/api/validate", [1, 2]).json()["errors"]
    assert issue == {"message": "the graph must be a JSON object with 'nodes' and 'edges'"}


@pytest.mark.parametrize(("configured", "flagged"), [({"LLM_DEFAULT_PROVIDER": "scripted"}, True),
                                                   ({"LLM_DEFAULT_PROVIDER": "openai"}, False)])
def test_validate_names_an_llm_node_this_deployment_cannot_run(reader, settings, configured, flagged):
    runtime.engine_config.cache_clear()
    settings.STEADYFLOW = {**settings.STEADYFLOW, **configured}
    bare = chain({"id": "classify", "type": "llm", "config": {"prompt": "Classify {{ input }}"}})
    scripted = chain({"id": "classify", "type": "llm", "config": {"prompt": "p", "script": [{"text": "hi"}]}})
    try:
        body = post_json(reader, "/api/validate", bare).json()
        assert post_json(reader, "/api/validate", scripted).json() == {"valid": True, "errors": []}
    finally:
        runtime.engine_config.cache_clear()
    if not flagged:
        assert body == {"valid": True, "errors": []}
        return
    (issue,) = body["errors"]
    assert body["valid"] is False and issue["node"] == "classify" and issue["kind"] == "deployment"
    assert "cannot run here" in issue["message"] and "needs a script" in issue["message"]


def test_validate_refuses_a_graph_past_the_node_limit_naming_the_bound(reader):
    big = chain(*({"id": f"n{i}", "type": "python", "config": {"function": "noop"}} for i in range(999)))
    assert len(big["nodes"]) == 1001
    body = post_json(reader, "/api/validate", big).json()
    assert body == {"valid": False, "errors": [
        {"message": "the graph has 1,001 nodes: 1,000 at most (MAX_NODES)", "field": "nodes"}]}


def test_validate_rejects_a_malformed_body_and_get(reader):
    assert_error(post_json(reader, "/api/validate", "{not json"), 400, "request body is not valid JSON")
    assert_error(reader.get("/api/validate"), 405, "method GET not allowed")


# --- Starting instances -----------------------------------------------------------------------------

def test_start_instance_creates_a_running_instance(operator, flow):
    response = post_json(operator, START.format(slug="api-flow"), {"input": {"customer": "ada"}})
    assert response.status_code == 201
    body = response.json()
    instance = WorkflowInstance.objects.get(pk=body["id"])
    assert body["workflow"] == "api-flow" and body["version"] == 1
    assert body["status"] == "running"
    assert body["context"] == {"customer": "ada"} == instance.input
    assert body["trace_id"] == instance.trace_id
    assert instance.created_by.username == "olga"
    # The start step committed with the instance; the first real step is queued.
    assert instance.steps.filter(node_id="work", status="queued").exists()


def test_start_without_body_uses_an_empty_input(operator, flow):
    response = operator.post(START.format(slug="api-flow"), data=b"", content_type="application/json")
    assert response.status_code == 201
    assert response.json()["context"] == {}


def test_idempotency_key_returns_the_same_instance(operator, flow):
    url = START.format(slug="api-flow")
    first = post_json(operator, url, {"input": {"n": 1}}, **{"Idempotency-Key": "order-77"})
    again = post_json(operator, url, {"input": {"n": 1}}, **{"Idempotency-Key": "order-77"})
    assert first.status_code == 201 and again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    other = post_json(operator, url, {"input": {"n": 1}}, **{"Idempotency-Key": "order-78"})
    assert other.json()["id"] != first.json()["id"]
    # The key may also come in the body.
    by_body = post_json(operator, url, {"input": {}, "idempotency_key": "order-77"})
    assert by_body.json()["id"] == first.json()["id"]
    assert WorkflowInstance.objects.count() == 2


def test_an_idempotency_key_belongs_to_its_workflow(operator, flow):
    save_version("api-other", GRAPH)
    key = {"Idempotency-Key": "order-77"}
    here = post_json(operator, START.format(slug="api-flow"), {"input": {"n": 1}}, **key).json()
    there = post_json(operator, START.format(slug="api-other"), {"input": {"n": 2}}, **key).json()
    assert here["id"] != there["id"], "the other workflow's instance came back"
    assert (here["workflow"], there["workflow"]) == ("api-flow", "api-other")
    assert there["context"] == {"n": 2}
    assert post_json(operator, START.format(slug="api-other"), {"input": {}}, **key).json()["id"] == there["id"]
    # Bulk starts look keys up on their own workflow too.
    bulk = START.format(slug="{slug}") + "/bulk"
    other = post_json(operator, bulk.format(slug="api-other"),
                      {"inputs": [{}, {"n": 3}], "idempotency_keys": ["order-77", "order-78"]}).json()["instances"]
    assert other[0]["id"] == there["id"]
    mine = post_json(operator, bulk.format(slug="api-flow"),
                     {"inputs": [{"n": 4}, {}], "idempotency_keys": ["order-78", "order-77"]}).json()["instances"]
    assert mine[1]["id"] == here["id"] and mine[0]["id"] != other[1]["id"]
    assert mine[0]["workflow"] == "api-flow" and mine[0]["context"] == {"n": 4}
    assert WorkflowInstance.objects.count() == 4


def test_start_rejects_bad_input_with_json_errors(operator, flow, settings):
    url = START.format(slug="api-flow")
    assert_error(post_json(operator, url, {"input": [1, 2]}), 400, "'input' must be a JSON object")
    assert_error(post_json(operator, url, {"input": "text"}), 400, "'input' must be a JSON object")
    assert_error(post_json(operator, url, [1]), 400, "'input' must be a JSON object")
    assert_error(post_json(operator, url, "{broken"), 400, "request body is not valid JSON")
    assert_error(post_json(operator, url, b"\xff\xfe"), 400, "request body is not valid JSON")
    settings.STEADYFLOW = {**settings.STEADYFLOW, "MAX_PAYLOAD_BYTES": 2048}
    assert_error(post_json(operator, url, {"input": {"blob": "x" * 5000}}), 413, "start input is")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    assert_error(post_json(operator, url, {"input": {"blob": "x" * 5000}}), 413, "request body is too large")
    assert WorkflowInstance.objects.count() == 0


INPUT_SCHEMA = {"type": "object", "required": ["amount", "who"], "properties": {
    "amount": {"type": "number", "description": "EUR", "default": 10, "minimum": 0},
    "who": {"type": "string"},
    "tags": {"type": "array", "items": {"type": "string"}, "default": ["a"]},
}}


@pytest.fixture
def typed(db: None) -> Any:
    return save_version("typed-flow", {**GRAPH, "input": INPUT_SCHEMA})


def test_start_applies_declared_defaults(operator, typed):
    response = post_json(operator, START.format(slug="typed-flow"), {"input": {"who": "ann"}})
    assert response.status_code == 201, response.content
    assert response.json()["context"] == {"who": "ann", "amount": 10, "tags": ["a"]}
    assert WorkflowInstance.objects.get().input == {"who": "ann", "amount": 10, "tags": ["a"]}


def test_start_refuses_input_the_schema_refuses_naming_each_field(operator, typed):
    url = START.format(slug="typed-flow")
    body = assert_error(post_json(operator, url, {"input": {"amount": "ten", "tags": [1]}}), 400,
                        "input.amount: must be a number")
    assert body["error"] == body["message"]
    assert body["fields"] == {"amount": "must be a number", "tags.0": "must be a string", "who": "is required"}
    assert body["message"] == "input.amount: must be a number; input.tags.0: must be a string; input.who: is required"
    body = assert_error(post_json(operator, url, {"input": {"who": "x", "amount": -1}}), 400,
                        "input.amount: must be at least 0")
    bulk = assert_error(post_json(operator, url + "/bulk", {"inputs": [{"who": "a"}, {"who": 3}]}), 400,
                        "inputs[1].who: must be a string")
    assert bulk["fields"] == {"who": "must be a string"} and bulk["index"] == 1
    assert WorkflowInstance.objects.count() == 0


def test_bulk_start_commits_every_instance_in_one_request(operator, flow):
    url = START.format(slug="api-flow") + "/bulk"
    response = post_json(operator, url, {"inputs": [{"n": 1}, {"n": 2}, {"n": 3}],
                                          "idempotency_keys": ["b-1", None, "b-3"]})
    assert response.status_code == 201
    bodies = response.json()["instances"]
    assert [b["context"] for b in bodies] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert all(b["status"] == "running" for b in bodies)
    again = post_json(operator, url, {"inputs": [{"n": 1}, {"n": 4}], "idempotency_keys": ["b-1", "b-4"]})
    assert again.json()["instances"][0]["id"] == bodies[0]["id"]
    assert WorkflowInstance.objects.count() == 4
    assert WorkflowInstance.objects.filter(steps__node_id="work", steps__status="queued").count() == 4


def test_bulk_start_rejects_bad_bodies_with_json_errors(operator, viewer, flow):
    url = START.format(slug="api-flow") + "/bulk"
    assert_error(post_json(operator, url, {"inputs": []}), 400, "'inputs' must be a non-empty list")
    assert_error(post_json(operator, url, {"inputs": [1]}), 400, "'inputs' must be a non-empty list")
    assert_error(post_json(operator, url, {"inputs": [{}] * 1001}), 400, "at most 1000 instances")
    assert_error(post_json(operator, url, {"inputs": [{}], "idempotency_keys": ["a", "b"]}), 400,
                 "'idempotency_keys' must be a list")
    assert_error(post_json(operator, url, {"inputs": [{}, {}], "idempotency_keys": ["a", "a"]}), 400,
                 "an idempotency key appears twice")
    assert_error(post_json(viewer, url, {"inputs": [{}]}), 403, "permission denied")
    assert WorkflowInstance.objects.count() == 0


def test_start_unknown_or_archived_workflow_is_a_json_404(operator, flow):
    assert_error(post_json(operator, START.format(slug="nope"), {}), 404, "workflow 'nope' does not exist")
    WorkflowDefinition.objects.filter(slug="api-flow").update(archived=True)
    assert_error(post_json(operator, START.format(slug="api-flow"), {}), 404, "does not exist")


def test_start_refuses_anonymous_unpermitted_and_wrong_method(anonymous, viewer, operator, flow):
    url = START.format(slug="api-flow")
    assert_error(post_json(anonymous, url, {}), 401, "authentication required")
    assert_error(post_json(viewer, url, {}), 403, "permission denied: you need workflows.add_workflowinstance")
    assert_error(operator.get(url), 405, "method GET not allowed (use POST)")
    assert_error(operator.delete(url), 405, "method DELETE not allowed")
    assert WorkflowInstance.objects.count() == 0


def test_start_checks_csrf_for_browser_sessions_and_answers_json(flow):
    user = user_with("carla", "add_workflowinstance")
    client = client_for(user, enforce_csrf_checks=True)
    url = START.format(slug="api-flow")
    assert_error(post_json(client, url, {}), 403, "CSRF check failed")
    client.get("/accounts/login/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    assert post_json(client, url, {}, **{"X-CSRFToken": token}).status_code == 201


# --- Reading instances ------------------------------------------------------------------------------

def test_instance_detail(operator, viewer, nobody, anonymous, flow):
    instance = runtime.start_instance(flow, {"q": 1})
    body = viewer.get(f"/api/instances/{instance.pk}").json()
    assert body["id"] == instance.pk and body["status"] == "running"
    assert body["steps"] == 2 and body["loop_count"] == 2
    assert body["context"] == {"q": 1} and body["reason"] is None and body["finished_at"] is None
    assert_error(viewer.get("/api/instances/999999"), 404, "instance 999999 does not exist")
    assert_error(anonymous.get(f"/api/instances/{instance.pk}"), 401, "authentication required")
    assert_error(nobody.get(f"/api/instances/{instance.pk}"), 403, "workflows.view_workflowinstance")
    assert_error(viewer.post(f"/api/instances/{instance.pk}"), 405, "method POST not allowed")


def test_instance_events_page_with_after_and_limit(viewer, flow):
    instance = runtime.start_instance(flow, {})
    url = f"/api/instances/{instance.pk}/events"
    everything = viewer.get(url).json()
    seqs = [e["seq"] for e in everything["events"]]
    assert seqs == list(range(1, everything["last_seq"] + 1)) and len(seqs) >= 3
    assert everything["events"][0]["type"] == "instance_started"
    assert all(e["instance"] == instance.pk for e in everything["events"])

    page = viewer.get(url, {"after": 1, "limit": 2}).json()
    assert [e["seq"] for e in page["events"]] == [2, 3]
    assert page["last_seq"] == everything["last_seq"]
    assert viewer.get(url, {"after": everything["last_seq"]}).json()["events"] == []


@pytest.mark.parametrize("params", [{"after": "x"}, {"limit": "many"}, {"limit": "0"}, {"limit": "-1"},
                                    {"limit": "1001"}, {"after": "-3"}])
def test_instance_events_bad_params_are_400(viewer, flow, params):
    instance = runtime.start_instance(flow, {})
    assert_error(viewer.get(f"/api/instances/{instance.pk}/events", params), 400, "'after'")


def test_instance_events_unknown_instance_and_unknown_api_path_are_json_404(viewer):
    assert_error(viewer.get("/api/instances/424242/events"), 404, "instance 424242 does not exist")
    assert_error(viewer.get("/api/instances/abc"), 404, "no API endpoint GET /api/instances/abc")
    assert_error(viewer.get("/api/nothing-here"), 404, "no API endpoint")


# --- With a real worker -----------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_started_instance_runs_on_a_worker_and_reads_back_completed(processes, redis_conn):
    save_version("api-flow", GRAPH)
    client = client_for(user_with("olga", "add_workflowinstance", "view_workflowinstance"))
    created = post_json(client, START.format(slug="api-flow"), {"input": {"who": "api"}},
                        **{"Idempotency-Key": "live-1"}).json()
    processes.worker("default")

    from tests.conftest import wait_for

    wait_for(lambda: client.get(f"/api/instances/{created['id']}").json()["status"] == "completed",
             message="the instance to complete")
    body = client.get(f"/api/instances/{created['id']}").json()
    assert body["steps"] == 3 and body["finished_at"] is not None and body["context"] == {"who": "api"}
    # Paging through the whole log in small pages yields every event once, in order.
    seqs: list[int] = []
    after = 0
    while True:
        page = client.get(f"/api/instances/{created['id']}/events", {"after": after, "limit": 3}).json()
        if not page["events"]:
            break
        seqs += [e["seq"] for e in page["events"]]
        after = page["events"][-1]["seq"]
    assert seqs == list(range(1, body_last_seq(client, created["id"]) + 1))
    assert [e["type"] for e in client.get(f"/api/instances/{created['id']}/events").json()["events"]][-1] == \
        "instance_completed"
    # The same key after completion still names the same instance.
    again = post_json(client, START.format(slug="api-flow"), {"input": {}}, **{"Idempotency-Key": "live-1"})
    assert again.json()["id"] == created["id"] and again.json()["status"] == "completed"


def body_last_seq(client: Client, instance_id: int) -> int:
    return client.get(f"/api/instances/{instance_id}/events", {"limit": 1}).json()["last_seq"]
