"""The editor's JSON endpoints and pages: every error path, every permission, CSRF."""

from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from workflows.authoring.definitions import save_version
from workflows.models import WorkflowDefinition, WorkflowInstance, WorkflowVersion

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def graph(*middle: dict[str, Any], edges: list[dict[str, Any]] | None = None,
          settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """start -> middle... -> end, positioned, unless `edges` is given."""
    nodes = [{"id": "start", "type": "start", "position": {"x": 0, "y": 0}}, *middle,
             {"id": "end", "type": "end", "position": {"x": 500, "y": 0}}]
    ids = [n["id"] for n in nodes]
    out: dict[str, Any] = {"nodes": nodes,
                           "edges": edges if edges is not None else [{"source": a, "target": b}
                                                                     for a, b in zip(ids, ids[1:], strict=False)]}
    if settings:
        out["settings"] = settings
    return out


NOOP = {"id": "work", "type": "python", "config": {"function": "noop"}, "position": {"x": 250, "y": 40}}


def ensure_role_groups() -> None:
    """The migrations' groups (a transactional test elsewhere may have flushed them)."""
    for module in sorted((ROOT / "workflows" / "migrations").glob("0*.py")):
        roles = getattr(import_module(f"workflows.migrations.{module.stem}"), "ROLES", None)
        for name, codenames in (roles or {}).items():
            group, _ = Group.objects.get_or_create(name=name)
            group.permissions.add(*Permission.objects.filter(content_type__app_label="workflows",
                                                             codename__in=codenames))


def client_for(*groups: str, username: str | None = None, csrf: bool = False) -> tuple[Client, User]:
    ensure_role_groups()
    user = User.objects.create(username=username or "-".join(groups) or "nobody")  # force_login: no password
    for name in groups:
        user.groups.add(Group.objects.get(name=name))
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client, user


@pytest.fixture
def designer() -> Client:
    return client_for("designers")[0]


@pytest.fixture
def viewer() -> Client:
    return client_for("viewers")[0]


@pytest.fixture
def flow() -> WorkflowVersion:
    return save_version("flow", graph(NOOP), name="Flow", message="first")


def post(client: Client, url: str, body: Any = None, raw: bytes | None = None) -> Any:
    data = raw if raw is not None else json.dumps(body if body is not None else {})
    return client.post(url, data=data, content_type="application/json")


SAVE_URL = "/api/workflows/flow/versions"


# ------------------------------------------------------------------ reading versions


def test_versions_list_for_any_logged_in_user(viewer: Client, flow: WorkflowVersion) -> None:
    designer_user = User.objects.create_user("dana")
    save_version("flow", graph(NOOP, settings={"max_transitions": 5}), message="limits", user=designer_user)
    WorkflowInstance.objects.create(version=flow, max_transitions=10)
    response = viewer.get(SAVE_URL)
    assert response.status_code == 200
    data = response.json()
    assert data["workflow"] == {"slug": "flow", "name": "Flow", "description": "", "archived": False}
    assert [v["number"] for v in data["versions"]] == [2, 1]
    newest, oldest = data["versions"]
    assert newest["message"] == "limits" and newest["created_by"] == "dana" and newest["instances"] == 0
    assert oldest["instances"] == 1 and oldest["nodes"] == 3 and oldest["edges"] == 2
    assert data["can_save"] is False


def test_reading_needs_a_login_and_known_things(flow: WorkflowVersion, viewer: Client) -> None:
    anonymous = Client()
    for url in (SAVE_URL, "/api/workflows/flow/versions/1", "/api/workflows/flow/diff?from=1&to=1"):
        response = anonymous.get(url)
        assert response.status_code == 401 and response.json()["message"] == "authentication required"
    assert post(anonymous, "/api/expressions/check", {"expression": "x"}).status_code == 401
    missing = viewer.get("/api/workflows/nope/versions")
    assert missing.status_code == 404 and "does not exist" in missing.json()["message"]
    assert viewer.get("/api/workflows/flow/versions/7").status_code == 404
    assert "has no version 7" in viewer.get("/api/workflows/flow/versions/7").json()["message"]
    assert viewer.put(SAVE_URL).status_code == 405
    assert viewer.post("/api/workflows/flow/versions/1").status_code == 405


def test_version_detail_returns_the_graph_with_positions(viewer: Client, flow: WorkflowVersion) -> None:
    data = viewer.get("/api/workflows/flow/versions/1").json()
    assert data["number"] == 1 and data["message"] == "first"
    assert data["graph"] == flow.graph
    assert data["graph"]["nodes"][1]["position"] == {"x": 250, "y": 40}


# ------------------------------------------------------------------ saving


def test_designer_saves_a_new_immutable_version(flow: WorkflowVersion) -> None:
    client, user = client_for("designers", username="dana")
    new_graph = graph(dict(NOOP, position={"x": 260, "y": 90}, retry={"max_attempts": 3}))
    response = post(client, SAVE_URL, {"graph": new_graph, "message": " moved work ", "base_version": 1,
                                       "name": "Flow 2", "description": "now with retries"})
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["version"]["number"] == 2 and data["version"]["created_by"] == "dana"
    assert data["workflow"]["name"] == "Flow 2"
    version = WorkflowVersion.objects.get(definition__slug="flow", number=2)
    assert version.graph == new_graph and version.message == "moved work" and version.created_by == user
    assert WorkflowVersion.objects.get(definition__slug="flow", number=1).graph == flow.graph
    definition = WorkflowDefinition.objects.get(slug="flow")
    assert (definition.name, definition.description) == ("Flow 2", "now with retries")


def test_saving_a_graph_past_the_node_limit_is_a_400_naming_the_bound(designer: Client,
                                                                     flow: WorkflowVersion) -> None:
    big = graph(*({"id": f"n{i}", "type": "python", "config": {"function": "noop"}} for i in range(3_998)))
    assert len(big["nodes"]) == 4_000  # the graph that took 5.6 s to start before the limit
    response = post(designer, SAVE_URL, {"graph": big, "message": "huge", "base_version": 1})
    assert response.status_code == 400, response.content[:300]
    assert response.json()["errors"] == [
        {"message": "the graph has 4,000 nodes: 1,000 at most (MAX_NODES)", "field": "nodes"}]
    assert WorkflowVersion.objects.filter(definition__slug="flow").count() == 1


def test_first_save_of_a_new_workflow(designer: Client) -> None:
    WorkflowDefinition.objects.create(slug="fresh", name="Fresh")
    response = post(designer, "/api/workflows/fresh/versions",
                    {"graph": graph(NOOP), "message": "v1", "base_version": None})
    assert response.status_code == 201 and response.json()["version"]["number"] == 1


def test_save_permissions_and_csrf(flow: WorkflowVersion) -> None:
    body = {"graph": graph(NOOP), "message": "x", "base_version": 1}
    assert post(Client(), SAVE_URL, body).status_code == 401
    for groups in [("viewers",), ("operators",)]:
        client = client_for(*groups)[0]
        response = post(client, SAVE_URL, body)
        assert response.status_code == 403, groups
        assert "designers" in response.json()["message"]
    strict, _ = client_for("designers", csrf=True)
    assert post(strict, SAVE_URL, body).status_code == 403  # no CSRF token
    strict.get("/workflows/flow/edit/")  # sets the CSRF cookie
    token = strict.cookies["csrftoken"].value
    ok = strict.post(SAVE_URL, data=json.dumps(body), content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert ok.status_code == 201
    assert WorkflowVersion.objects.filter(definition__slug="flow").count() == 2


@pytest.mark.parametrize(("body", "raw", "status", "message"), [
    (None, b"{not json", 400, "not valid JSON"),
    (None, b"[1, 2]", 400, "must be a JSON object"),
    ({"message": "x"}, None, 400, "'graph' must be a JSON object"),
    ({"graph": [], "message": "x"}, None, 400, "'graph' must be a JSON object"),
    ({"graph": graph(NOOP)}, None, 400, "message is required"),
    ({"graph": graph(NOOP), "message": "   "}, None, 400, "message is required"),
    ({"graph": graph(NOOP), "message": 5}, None, 400, "message is required"),
    ({"graph": graph(NOOP), "message": "x" * 501}, None, 400, "too long"),
    ({"graph": graph(NOOP), "message": "x", "name": ""}, None, 400, "'name'"),
    ({"graph": graph(NOOP), "message": "x", "name": "n" * 201}, None, 400, "'name'"),
    ({"graph": graph(NOOP), "message": "x", "description": 3}, None, 400, "'description'"),
])
def test_save_rejects_bad_requests(designer: Client, flow: WorkflowVersion, body: Any, raw: bytes | None,
                                   status: int, message: str) -> None:
    if body is not None:
        body.setdefault("base_version", 1)
    response = post(designer, SAVE_URL, body, raw=raw)
    assert response.status_code == status
    assert message in response.json()["message"]
    assert WorkflowVersion.objects.filter(definition__slug="flow").count() == 1


def test_save_too_large(designer: Client, flow: WorkflowVersion, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = post(designer, SAVE_URL, {"graph": graph(NOOP), "message": "x" * 2000, "base_version": 1})
    assert response.status_code == 413 and "too large" in response.json()["message"]


CYCLE = graph(NOOP, {"id": "again", "type": "python", "config": {"function": "noop"}},
              edges=[{"source": "start", "target": "work"}, {"source": "work", "target": "again"},
                     {"source": "again", "target": "work"}, {"source": "again", "target": "end",
                                                             "when": "done"}])


@pytest.mark.parametrize(("bad_graph", "expected"), [
    (CYCLE, {"node": "work", "text": "unconditional cycle work -> again -> work"}),
    (graph(NOOP, edges=[{"source": "start", "target": "work"}, {"source": "work", "target": "end",
                                                                "when": "route =="}]),
     {"edge": 1, "field": "when", "text": "does not parse"}),
    (graph(NOOP, edges=[{"source": "start", "target": "work"}, {"source": "work", "target": "gone"}]),
     {"edge": 1, "field": "target", "text": "'gone' is not a node"}),
    (graph({"id": "work", "type": "teleport"}), {"node": "work", "field": "type", "text": "unknown node type"}),
    (graph({"id": "work", "type": "python", "config": {}}), {"node": "work", "text": "'function' is a required"}),
    (graph({"id": "work", "type": "python", "config": {"function": "missing.fn"}}),
     {"node": "work", "field": "config.function", "text": "is not registered"}),
    (graph(dict(NOOP, retry={"max_attempts": 0})), {"node": "work", "text": "max_attempts"}),
    (graph(dict(NOOP, id="9bad")), {"node": "9bad", "field": "id", "text": "id must start"}),
    (graph(NOOP, settings={"max_transitions": 0}), {"field": "settings.max_transitions", "text": "minimum"}),
    (graph(NOOP, edges=[{"source": "start", "target": "end"}, {"source": "work", "target": "end"}]),
     {"node": "work", "text": "unreachable"}),
    ({"nodes": [], "edges": []}, {"text": "'nodes' must be a non-empty list"}),
])
def test_save_names_where_an_invalid_graph_is_wrong(designer: Client, flow: WorkflowVersion,
                                                    bad_graph: dict[str, Any], expected: dict[str, Any]) -> None:
    response = post(designer, SAVE_URL, {"graph": bad_graph, "message": "broken", "base_version": 1})
    assert response.status_code == 400
    data = response.json()
    assert data["message"].startswith("the graph is invalid")
    text = expected.pop("text")
    matching = [e for e in data["errors"] if text in e["message"]]
    assert matching, data["errors"]
    for key, value in expected.items():
        assert matching[0].get(key) == value, (key, matching[0])
    assert WorkflowVersion.objects.filter(definition__slug="flow").count() == 1


def test_the_validate_endpoint_reports_the_same_errors(viewer: Client) -> None:
    response = post(viewer, "/api/validate", {"graph": CYCLE})
    assert response.status_code == 200
    data = response.json()
    assert data["valid"] is False and "unconditional cycle" in data["errors"][0]["message"]
    fixed = json.loads(json.dumps(CYCLE))
    fixed["edges"][2]["when"] = "retry"
    assert post(viewer, "/api/validate", {"graph": fixed}).json() == {"valid": True, "errors": []}


def test_save_conflicts_when_someone_saved_meanwhile(designer: Client, flow: WorkflowVersion) -> None:
    other = User.objects.create_user("olga")
    save_version("flow", graph(dict(NOOP, timeout_s=5)), message="olga's", user=other)
    body = {"graph": graph(NOOP), "message": "mine", "base_version": 1}
    response = post(designer, SAVE_URL, body)
    assert response.status_code == 409
    data = response.json()
    assert "version 2 was saved by olga" in data["message"] and data["latest"]["number"] == 2
    # What "save anyway" would overwrite: olga's version (author, graph) and both sides' changes.
    assert data["latest"]["created_by"] == "olga" and data["latest"]["message"] == "olga's"
    assert data["latest"]["graph"] == graph(dict(NOOP, timeout_s=5))
    work = NOOP["id"]
    assert data["their_changes"]["nodes"]["changed"] == [{"id": work, "fields": ["timeout_s"],
                                                          "changes": [{"path": "timeout_s", "after": 5}]}]
    assert data["your_changes"]["nodes"]["changed"] == [{"id": work, "fields": ["timeout_s"],
                                                         "changes": [{"path": "timeout_s", "before": 5}]}]
    assert data["your_changes"]["identical"] is False
    forced = post(designer, SAVE_URL, dict(body, force=True))
    assert forced.status_code == 201 and forced.json()["version"]["number"] == 3
    assert forced.json()["replaced"]["number"] == 2 and forced.json()["replaced"]["created_by"] == "olga"


def test_a_conflict_with_a_malformed_graph_still_answers_json(designer: Client, flow: WorkflowVersion) -> None:
    save_version("flow", graph(dict(NOOP, timeout_s=5)), message="meanwhile")
    odd = {"nodes": [{"id": ["x"]}, 3], "edges": "no", "settings": [1]}
    response = post(designer, SAVE_URL, {"graph": odd, "message": "m", "base_version": 1})
    assert response.status_code == 409 and response.json()["your_changes"]["nodes"]["removed"]


def test_archived_workflows_cannot_be_saved_or_restored(designer: Client, flow: WorkflowVersion) -> None:
    WorkflowDefinition.objects.filter(slug="flow").update(archived=True)
    response = post(designer, SAVE_URL, {"graph": graph(NOOP), "message": "x", "base_version": 1})
    assert response.status_code == 409 and "archived" in response.json()["message"]
    assert post(designer, "/api/workflows/flow/versions/1/restore").status_code == 409


# ------------------------------------------------------------------ restore


def test_restore_saves_an_old_version_as_the_newest(flow: WorkflowVersion) -> None:
    client, user = client_for("designers", username="dana")
    save_version("flow", graph(dict(NOOP, timeout_s=9)), message="second")
    response = post(client, "/api/workflows/flow/versions/1/restore")
    assert response.status_code == 201
    assert response.json()["version"]["number"] == 3 and response.json()["restored_from"] == 1
    restored = WorkflowVersion.objects.get(definition__slug="flow", number=3)
    assert restored.graph == flow.graph and restored.message == "Restored from v1" and restored.created_by == user
    custom = post(client, "/api/workflows/flow/versions/2/restore", {"message": "back to 2"})
    assert custom.json()["version"]["number"] == 4
    assert WorkflowVersion.objects.get(definition__slug="flow", number=4).message == "back to 2"


def test_restoring_the_graph_the_latest_version_already_holds_makes_no_duplicate(flow: WorkflowVersion) -> None:
    client, _ = client_for("designers", username="dana")
    save_version("flow", graph(dict(NOOP, timeout_s=9)), message="second")
    assert post(client, "/api/workflows/flow/versions/1/restore").status_code == 201
    again = post(client, "/api/workflows/flow/versions/1/restore")
    assert again.status_code == 200
    assert again.json() == {**again.json(), "unchanged": True, "restored_from": 1}
    assert again.json()["version"]["number"] == 3
    assert WorkflowVersion.objects.filter(definition__slug="flow").count() == 3


def test_restore_errors(designer: Client, viewer: Client, flow: WorkflowVersion) -> None:
    assert post(viewer, "/api/workflows/flow/versions/1/restore").status_code == 403
    assert post(Client(), "/api/workflows/flow/versions/1/restore").status_code == 401
    assert designer.get("/api/workflows/flow/versions/1/restore").status_code == 405
    assert post(designer, "/api/workflows/flow/versions/9/restore").status_code == 404
    assert post(designer, "/api/workflows/nope/versions/1/restore").status_code == 404
    long = post(designer, "/api/workflows/flow/versions/1/restore", {"message": "m" * 501})
    assert long.status_code == 400
    # A version saved before a validation rule existed cannot come back unchecked.
    stale = WorkflowVersion.objects.create(definition=flow.definition, number=2,
                                           graph={"nodes": [{"id": "start", "type": "start"}], "edges": []})
    response = post(designer, f"/api/workflows/flow/versions/{stale.number}/restore")
    assert response.status_code == 400
    assert "no longer passes validation" in response.json()["message"]
    assert any("end node" in e["message"] for e in response.json()["errors"])


# ------------------------------------------------------------------ diff


def test_diff_lists_nodes_and_edges_added_removed_changed_and_moved(viewer: Client) -> None:
    old = graph(NOOP, {"id": "gone", "type": "python", "config": {"function": "noop"}},
                edges=[{"source": "start", "target": "work"}, {"source": "work", "target": "gone"},
                       {"source": "gone", "target": "end"}], settings={"max_transitions": 5})
    new = graph(dict(NOOP, config={"function": "examples.canned_reply"}),
                {"id": "fresh", "type": "wait", "config": {"seconds": 1}},
                edges=[{"source": "start", "target": "work"}, {"source": "work", "target": "fresh"},
                       {"source": "fresh", "target": "end", "when": "true"}], settings={"max_transitions": 9})
    new["nodes"][-1]["position"] = {"x": 999, "y": 0}  # end moved only
    save_version("d", old, message="old")
    save_version("d", new, message="new")
    response = viewer.get("/api/workflows/d/diff?from=1&to=2")
    assert response.status_code == 200
    data = response.json()
    assert data["from"] == 1 and data["to"] == 2 and data["identical"] is False
    assert data["nodes"] == {"added": ["fresh"], "removed": ["gone"],
                             "changed": [{"id": "work", "fields": ["config"], "changes": [
                                 {"path": "config.function", "before": "noop", "after": "examples.canned_reply"}]}],
                             "moved": ["end"]}
    assert data["edges"]["added"] == [{"source": "fresh", "target": "end", "when": "true"},
                                      {"source": "work", "target": "fresh", "when": None}]
    assert data["edges"]["removed"] == [{"source": "gone", "target": "end", "when": None},
                                        {"source": "work", "target": "gone", "when": None}]
    assert data["edges"]["changed"] == []
    assert data["settings"] == {"max_transitions": [5, 9]}


def test_diff_pairs_an_edge_whose_condition_changed(viewer: Client) -> None:
    old = graph(NOOP, edges=[{"source": "start", "target": "work"}, {"source": "work", "target": "end",
                                                                     "when": "a"}])
    new = graph(NOOP, edges=[{"source": "start", "target": "work"}, {"source": "work", "target": "end",
                                                                     "when": "b"}])
    save_version("d", old)
    save_version("d", new)
    data = viewer.get("/api/workflows/d/diff?from=1&to=2").json()
    assert data["edges"]["added"] == [] and data["edges"]["removed"] == []
    assert data["edges"]["changed"] == [{"source": "work", "target": "end", "when": "b", "fields": ["when"],
                                         "before": {"source": "work", "target": "end", "when": "a"}}]
    same = viewer.get("/api/workflows/d/diff?from=2&to=2").json()
    assert same["identical"] is True and same["nodes"]["changed"] == []


@pytest.mark.parametrize(("query", "status", "message"), [
    ("", 400, "give both versions"),
    ("?from=1", 400, "give both versions"),
    ("?from=one&to=1", 400, "whole number"),
    ("?from=1&to=5", 404, "has no version 5"),
])
def test_diff_errors(viewer: Client, flow: WorkflowVersion, query: str, status: int, message: str) -> None:
    response = viewer.get(f"/api/workflows/flow/diff{query}")
    assert response.status_code == status and message in response.json()["message"]


# ------------------------------------------------------------------ expression check


@pytest.mark.parametrize(("expression", "valid", "message"), [
    ("route == 'search'", True, "condition parses"),
    ("context.score > 0.5 and not approved", True, "condition parses"),
    ("route ==", False, "does not parse"),
    ("output.__class__", False, "not allowed"),
    ("(lambda: 1)()", False, "lambda is not allowed"),
    ("", True, "always fires"),
    (None, True, "always fires"),
])
def test_check_expression(viewer: Client, expression: Any, valid: bool, message: str) -> None:
    response = post(viewer, "/api/expressions/check", {"expression": expression})
    assert response.status_code == 200
    assert response.json()["valid"] is valid and message in response.json()["message"]


def test_check_expression_with_its_source_node_checks_the_routes(viewer: Client) -> None:
    router = {"id": "pick", "type": "router", "config": {"rules": [{"when": "true", "route": "answer"}],
                                                        "default": "lookup"}}
    typo = post(viewer, "/api/expressions/check", {"expression": "route == 'answr'", "source": router}).json()
    assert typo["valid"] is False
    assert typo["message"] == "condition tests route 'answr', but node 'pick' routes only to answer, lookup"
    fine = post(viewer, "/api/expressions/check", {"expression": "route in ['answer', 'lookup']", "source": router})
    assert fine.json() == {"valid": True, "message": "condition parses"}
    llm = {"id": "ask", "type": "llm", "config": {"routes": ["yes", "no"]},
           "fallback": {"mode": "rule", "route": "maybe"}}
    assert post(viewer, "/api/expressions/check", {"expression": "route == 'maybe'", "source": llm}).json()["valid"]
    # A source declaring no routes leaves literals to run time.
    python = {"id": "f", "type": "python", "config": {"function": "noop"}}
    assert post(viewer, "/api/expressions/check", {"expression": "route == 'x'", "source": python}).json()["valid"]
    assert post(viewer, "/api/expressions/check", {"expression": "x", "source": "pick"}).status_code == 400


def test_check_expression_errors(viewer: Client) -> None:
    assert post(viewer, "/api/expressions/check", {"expression": 5}).status_code == 400
    assert post(viewer, "/api/expressions/check", raw=b"nope").status_code == 400
    assert viewer.get("/api/expressions/check").status_code == 405


# ------------------------------------------------------------------ pages


def test_workflow_list_shows_versions_statuses_and_last_run(viewer: Client, flow: WorkflowVersion) -> None:
    WorkflowInstance.objects.create(version=flow, max_transitions=10, status="completed")
    last = WorkflowInstance.objects.create(version=flow, max_transitions=10, status="failed")
    WorkflowDefinition.objects.create(slug="empty", name="Empty one")
    WorkflowDefinition.objects.create(slug="old", name="Old one", archived=True)
    page = viewer.get("/workflows/").content.decode()
    assert "Flow" in page and "v1" in page and "completed 1" in page and "failed 1" in page
    assert f"/instances/{last.pk}/" in page and "not saved yet" in page and "Old one" not in page
    assert "Create workflow" not in page and "Duplicate" not in page and "Archive" not in page
    archived = viewer.get("/workflows/?archived=1").content.decode()
    assert "Old one" in archived and "Flow" not in archived
    assert Client().get("/workflows/").status_code == 302  # to the login page


def test_create_duplicate_archive(designer: Client, viewer: Client, flow: WorkflowVersion) -> None:
    page = designer.get("/workflows/").content.decode()
    assert "Create workflow" in page and "Duplicate" in page and "Archive" in page
    response = designer.post("/workflows/", {"name": "Support triage"})
    assert response.status_code == 302 and response["Location"] == "/workflows/support-triage/edit/"
    assert WorkflowDefinition.objects.get(slug="support-triage").versions.count() == 0
    again = designer.post("/workflows/", {"name": "Support triage"}, follow=True)
    assert again.redirect_chain[-1][0] == "/workflows/support-triage-2/edit/"
    taken = designer.post("/workflows/", {"name": "X", "slug": "flow"}, follow=True)
    assert "already exists" in taken.content.decode()
    bad = designer.post("/workflows/", {"name": "X", "slug": "Not A Slug"}, follow=True)
    assert "is not valid" in bad.content.decode()
    assert "Give the new workflow a name" in designer.post("/workflows/", {"name": " "}, follow=True).content.decode()
    assert viewer.post("/workflows/", {"name": "Nope"}).status_code == 403

    copy = designer.post("/workflows/flow/duplicate")
    assert copy.status_code == 302 and copy["Location"] == "/workflows/flow-copy/edit/"
    duplicate = WorkflowDefinition.objects.get(slug="flow-copy")
    assert duplicate.name == "Flow (copy)" and duplicate.latest_version().graph == flow.graph
    assert duplicate.latest_version().message == "Duplicated from flow v1"
    assert viewer.post("/workflows/flow/duplicate").status_code == 403
    assert designer.get("/workflows/flow/duplicate").status_code == 405

    assert viewer.post("/workflows/flow/archive").status_code == 403
    assert designer.post("/workflows/flow/archive").status_code == 302
    assert WorkflowDefinition.objects.get(slug="flow").archived is True
    start = post(designer, "/api/workflows/flow/instances", {"input": {}})
    assert start.status_code == 404  # archived workflows start nothing
    archived = editor_config(designer, "/workflows/flow/edit/")
    assert archived["readOnly"] is True and archived["canRun"] is False and archived["archived"] is True
    designer.post("/workflows/flow/archive", {"archived": "0"})
    assert WorkflowDefinition.objects.get(slug="flow").archived is False


def editor_config(client: Client, url: str) -> dict[str, Any]:
    response = client.get(url)
    assert response.status_code == 200
    return response.context["config"]


def test_editor_page_is_read_only_without_the_designers_permission(designer: Client, viewer: Client,
                                                                   flow: WorkflowVersion) -> None:
    mine = editor_config(designer, "/workflows/flow/edit/")
    assert mine["readOnly"] is False and mine["canSave"] is True and mine["canRun"] is True
    assert mine["version"] == mine["latest"] == 1
    assert mine["urls"]["version"] == "/api/workflows/flow/versions/"
    assert mine["urls"]["instance"] == "/instances/{id}/"
    theirs = editor_config(viewer, "/workflows/flow/edit/")
    assert theirs["readOnly"] is True and theirs["canSave"] is False and theirs["canRun"] is False
    save_version("flow", graph(dict(NOOP, timeout_s=3)), message="second")
    old = editor_config(designer, "/workflows/flow/edit/?version=1")
    assert old["readOnly"] is True and old["version"] == 1 and old["latest"] == 2
    missing = designer.get("/workflows/flow/edit/?version=99")
    assert missing.status_code == 302 and missing["Location"] == "/workflows/flow/edit/"
    assert designer.get("/workflows/nope/edit/").status_code == 404
    page = designer.get("/workflows/flow/edit/").content.decode()
    assert "vendor/cytoscape.min.js" in page and "js/editor/main.js" in page and 'id="editor-config"' in page


def test_run_from_the_editor_starts_the_latest_version(designer: Client, flow: WorkflowVersion) -> None:
    response = post(designer, "/api/workflows/flow/instances", {"input": {"q": 1}})
    assert response.status_code == 201
    instance = WorkflowInstance.objects.get(pk=response.json()["id"])
    assert instance.version == flow and instance.input == {"q": 1}
    bad = post(designer, "/api/workflows/flow/instances", {"input": [1]})
    assert bad.status_code == 400 and "JSON object" in bad.json()["message"]
    viewer_client = client_for("viewers", username="vic")[0]
    assert post(viewer_client, "/api/workflows/flow/instances", {"input": {}}).status_code == 403


def test_the_version_apis_expose_the_declared_input(viewer: Client, flow: WorkflowVersion) -> None:
    assert viewer.get("/api/workflows/flow/versions").json()["input_schema"] is None
    schema = {"type": "object", "properties": {"q": {"type": "string", "default": "hi", "description": "ask"}}}
    save_version("flow", {**graph(NOOP), "input": schema}, message="typed")
    assert viewer.get("/api/workflows/flow/versions").json()["input_schema"] == schema
    detail = viewer.get("/api/workflows/flow/versions/2").json()
    assert detail["input_schema"] == schema and detail["graph"]["input"] == schema
    assert viewer.get("/api/workflows/flow/versions/1").json()["input_schema"] is None
    diff = viewer.get("/api/workflows/flow/diff?from=1&to=2").json()
    assert diff["input_changed"] is True and diff["identical"] is False
    assert diff["input"]["declared"] == [False, True]
    assert diff["input"]["added"] == [{"name": "q", "type": "string", "required": False}]
    # The editor page carries it too (the Run dialog's form), with the picker's and the side panel's needs.
    config = editor_config(viewer, "/workflows/flow/edit/")
    assert config["inputSchema"] == schema and config["urls"]["functions"] == "/api/functions"
    assert config["shapes"]["input"]["properties"]["type"] == {"const": "object"}


def test_a_bad_input_schema_is_refused_at_save_naming_input(designer: Client, flow: WorkflowVersion) -> None:
    body = {"graph": {**graph(NOOP), "input": {"type": "object", "properties": {"n": {"type": "num"}}}},
            "message": "typed", "base_version": 1}
    response = post(designer, SAVE_URL, body)
    assert response.status_code == 400
    (issue,) = response.json()["errors"]
    assert issue["field"] == "input.properties.n.type" and issue["message"].startswith("input.properties.n.type:")
