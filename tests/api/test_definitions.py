"""v1 workflow definitions: list, get, export a graph, validate, save a version, diff two versions."""

from __future__ import annotations

import copy
from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from tests.api.conftest import HUMAN, SIMPLE, Api, assert_problem
from workflows.authoring.definitions import save_version
from workflows.models import WorkflowDefinition


def test_list_get_and_export(as_role: Any) -> None:
    save_version("simple", SIMPLE)
    save_version("simple", HUMAN, message="second")
    save_version("old", SIMPLE)
    WorkflowDefinition.objects.filter(slug="old").update(archived=True)
    api = as_role("viewer")
    assert api.get("workflows").json()["items"] == [
        {"slug": "simple", "name": "simple", "description": "", "archived": False, "latest_version": 2}]
    assert [w["slug"] for w in api.get("workflows?archived=true").json()["items"]] == ["old"]
    detail = api.get("workflows/simple").json()
    assert [v["number"] for v in detail["versions"]] == [2, 1] and detail["versions"][0]["message"] == "second"
    assert api.get("workflows/simple/graph").json()["graph"]["nodes"][1]["id"] == "ask"
    assert api.get("workflows/simple/graph?version=1").json()["graph"] == SIMPLE
    assert_problem(api.get("workflows/simple/graph?version=9"), 404, "has no version 9")
    assert_problem(api.get("workflows/nope"), 404, "'nope' does not exist")
    assert_problem(api.get("workflows/simple/graph?version=0"), 422)


def test_validate_names_each_problem(as_role: Any) -> None:
    api = as_role("viewer")
    assert api.post("validate", {"graph": SIMPLE}).json() == {"valid": True, "errors": []}
    broken = copy.deepcopy(SIMPLE)
    broken["edges"].append({"source": "nap", "target": "ghost"})
    result = api.post("validate", {"graph": broken}).json()
    assert result["valid"] is False and any("ghost" in e["message"] for e in result["errors"])
    assert_problem(api.post("validate", {"graph": "nodes"}), 422)


def test_save_a_version(people: dict[str, User], as_role: Any) -> None:
    save_version("simple", SIMPLE)
    designer = as_role("designer", "read", "design")
    response = designer.post("workflows/simple/versions", {"graph": HUMAN, "message": "ask first", "base_version": 1})
    assert response.status_code == 201 and response.json()["version"]["number"] == 2
    stale = designer.post("workflows/simple/versions", {"graph": SIMPLE, "message": "again", "base_version": 1})
    assert_problem(stale, 409, "version 2 was saved")
    broken = {"nodes": [{"id": "start", "type": "start"}], "edges": []}
    body = assert_problem(designer.post("workflows/simple/versions",
                                        {"graph": broken, "message": "x", "base_version": 2}), 400, "invalid")
    assert body["errors"] and all("message" in e for e in body["errors"])
    assert_problem(designer.post("workflows/simple/versions", {"graph": SIMPLE, "message": ""}), 422)
    assert_problem(designer.post("workflows/nope/versions", {"graph": SIMPLE, "message": "x"}), 404)
    assert_problem(as_role("designer", "read").post("workflows/simple/versions",
                                                     {"graph": SIMPLE, "message": "x", "force": True}),
                   403, "'design' scope")
    # An operator's token cannot hold `design`; the operator is refused by permission, token or session.
    assert_problem(as_role("operator").post("workflows/simple/versions", {"graph": SIMPLE, "message": "x"}),
                   403, "permission denied: you need workflows.add_workflowversion")
    client = Client()
    client.force_login(people["operator"])
    assert_problem(Api(client).post("workflows/simple/versions", {"graph": SIMPLE, "message": "x"}),
                   403, "permission denied: you need workflows.add_workflowversion")


def test_diff_two_versions(as_role: Any) -> None:
    save_version("simple", SIMPLE)
    save_version("simple", HUMAN)
    api = as_role("viewer")
    diff = api.get("workflows/simple/diff?from=1&to=2").json()
    assert diff["from"] == 1 and diff["to"] == 2
    assert diff["nodes"]["added"] == ["ask"] and diff["nodes"]["removed"] == ["nap"] and not diff["identical"]
    assert api.get("workflows/simple/diff?from=1&to=1").json()["identical"] is True
    assert_problem(api.get("workflows/simple/diff?from=1&to=5"), 404, "no version 5")
    body = assert_problem(api.get("workflows/simple/diff?from=1"), 422)
    assert body["errors"] == [{"field": "query.to", "message": "Field required"}]
