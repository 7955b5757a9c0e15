"""Every JSON Schema a graph carries is itself checked against its metaschema at save (issue 19, item 1).

A human node whose declared `inputs` were not JSON Schema (`{"type": 5}`) used to be accepted; its
review page and its approval then answered 500. Now the save (and /api/validate) refuses it with a
4xx naming the node and the field, and a graph stored before the check still gets a page and a 4xx
on approval, never a 500.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.conftest import chain
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.credentials.store import validate
from workflows.engine.errors import GraphInvalid
from workflows.models import ReviewItem, WorkflowDefinition, WorkflowVersion

BAD_SCHEMAS = [{"type": 5}, {"enum": 5}, {"minLength": -1}, {"required": "x"}, {"properties": []},
               {"type": "string", "pattern": "("}]


def human(inputs: dict[str, Any]) -> dict[str, Any]:
    return chain({"id": "ask", "type": "human", "config": {"prompt": "ok?", "inputs": inputs}})


@pytest.mark.parametrize("schema", BAD_SCHEMAS)
def test_human_inputs_that_are_not_json_schema_are_refused(db: None, schema: dict[str, Any]) -> None:
    issues = validate(human({"amount": schema}))
    assert issues, schema
    assert issues[0].node == "ask"
    assert issues[0].field == "config.inputs.amount"
    assert "not a valid JSON Schema" in issues[0].message and "'ask'" in issues[0].message


def test_valid_human_inputs_pass(db: None) -> None:
    assert validate(human({"amount": {"type": "number", "minimum": 0}, "note": {"type": "string"}})) == []


def test_a_remote_reference_is_refused(db: None) -> None:
    issues = validate(human({"a": {"$ref": "https://attacker.example/schema.json"}}))
    assert [i.field for i in issues] == ["config.inputs.a"]
    assert "reference" in issues[0].message


@pytest.mark.parametrize("schema", [{"type": 5}, {"$ref": "https://attacker.example/s.json"}])
def test_tool_parameters_are_checked_against_the_metaschema(db: None, schema: dict[str, Any]) -> None:
    graph = chain({"id": "agent", "type": "llm", "config": {
        "provider": "scripted", "script": [{"text": "hi"}], "prompt": "go",
        "tools": [{"name": "t", "parameters": schema, "target": {"type": "python", "function": "noop"}}]}})
    issues = validate(graph)
    assert [i.field for i in issues] == ["config.tools.0.parameters"], issues
    assert issues[0].node == "agent"


def test_a_compensation_llm_tool_is_checked_too(db: None) -> None:
    graph = chain({"id": "work", "type": "python", "config": {"function": "noop"},
                   "compensate": {"type": "llm", "config": {
                       "provider": "scripted", "script": [{"text": "undone"}], "prompt": "undo",
                       "tools": [{"name": "t", "parameters": {"type": 5},
                                  "target": {"type": "python", "function": "noop"}}]}}})
    assert [(i.node, i.field) for i in validate(graph)] == [("work", "compensate.config.tools.0.parameters")]


def test_the_save_api_answers_400_naming_node_and_field(admin_client_: Client) -> None:
    save_version("bad-schema", chain())
    response = admin_client_.post("/api/workflows/bad-schema/versions", data=json.dumps(
        {"graph": human({"amount": {"type": 5}}), "base_version": 1, "message": "m"}), content_type="application/json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert errors[0]["node"] == "ask" and errors[0]["field"] == "config.inputs.amount"
    with pytest.raises(GraphInvalid):
        save_version("bad-schema", human({"amount": {"type": 5}}))


@pytest.fixture
def stored_task(db: None) -> ReviewItem:
    """A human task of a graph stored before the check (written around save_version)."""
    definition = WorkflowDefinition.objects.create(slug="old-human", name="old")
    version = WorkflowVersion.objects.create(definition=definition, number=1, graph=human(
        {"amount": {"type": 5}, "choice": {"enum": 5}}))
    instance = runtime.start_instance(version, {})
    return ReviewItem.objects.get(instance=instance, reason="human_task")


def test_a_stored_invalid_schema_still_renders_its_review_page(stored_task: ReviewItem,
                                                               admin_client_: Client) -> None:
    page = admin_client_.get(f"/review/{stored_task.pk}/")
    assert page.status_code == 200
    assert b"not a valid JSON Schema" in page.content


def test_approving_against_a_stored_invalid_schema_is_a_4xx(stored_task: ReviewItem,
                                                            admin_client_: Client) -> None:
    instance = stored_task.instance
    response = admin_client_.post(f"/api/instances/{instance.pk}/review", data=json.dumps(
        {"action": "approve", "inputs": {"amount": 3, "choice": "a"}}), content_type="application/json")
    assert 400 <= response.status_code < 500, response.content
    assert "not a valid JSON Schema" in response.json()["message"]
    page = admin_client_.post(f"/review/{stored_task.pk}/", {"action": "approve", "input_amount": "3",
                                                             "input_choice": '"a"'})
    assert page.status_code in (200, 302, 400)
    # Rejecting still works: the task can be closed.
    response = admin_client_.post(f"/api/instances/{instance.pk}/review", data=json.dumps(
        {"action": "reject"}), content_type="application/json")
    assert response.status_code == 200, response.content


@pytest.mark.parametrize("schema", [{"type": "object", "properties": {"a": {"type": 5}}},
                                    {"type": "object", "properties": {"a": {"$ref": "https://x.example/s"}}},
                                    {"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}])
def test_the_workflow_input_schema_is_refused_too(db: None, schema: dict[str, Any]) -> None:
    # The start input's schema is a bounded subset of JSON Schema (engine/inputs.py): no $ref, no
    # pattern, typed keywords; so it was refused before this issue as well.
    issues = validate({**chain(), "input": schema})
    assert issues and all(i.field and i.field.startswith("input") for i in issues)
