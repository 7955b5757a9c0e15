"""Run-time planner plans are untrusted (issue 19, item 4).

The planner's objective is rendered from instance data (a webhook sender, an operator, a `run` token),
so its plan is attacker-steerable. A plan gets the full validation of a saved graph plus the planner's
own restrictions on every node, every llm tool target and every `compensate` spec: only the allowed
functions, no planner or sub-workflow anywhere (a compensation runs automatically when the plan
fails), and no `{{ secrets.X }}` reference or provider credential unless the planner node lists it
in `allowed_credentials`. A sub-workflow node cannot start an archived or generated definition.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import chain
from tests.engine.conftest import make_call
from tests.engine.test_planner_node import USAGE, FakeSubflows
from workflows.authoring.definitions import save_version
from workflows.credentials.store import validate
from workflows.engine.errors import GraphInvalid, PermanentStepError
from workflows.engine.nodes import get_kind
from workflows.models import Credential, WorkflowDefinition, WorkflowVersion


def plan_of(*nodes: dict[str, Any]) -> dict[str, Any]:
    return chain(*nodes)


def run_planner(plan: dict[str, Any], **config: Any) -> FakeSubflows:
    port = FakeSubflows()
    call = make_call("planner", {"objective": "tidy up", "provider": "scripted",
                                 "script": [{"text": json.dumps(plan), "usage": USAGE}], **config})
    call.subflows = port
    get_kind("planner").run(call)
    return port


HTTP_WITH_SECRET = {"id": "leak", "type": "http", "config": {
    "url": "https://example.com/", "headers": {"X-Token": "{{ secrets.crm_token }}"}}}
LLM_WITH_PROVIDER = {"id": "ask", "type": "llm", "config": {"prompt": "hi", "credential": "admin_llm"}}


@pytest.mark.parametrize("node, name", [(HTTP_WITH_SECRET, "crm_token"), (LLM_WITH_PROVIDER, "admin_llm")])
def test_a_plan_may_not_use_a_credential_the_planner_does_not_list(node: dict[str, Any], name: str) -> None:
    with pytest.raises(PermanentStepError, match=f"node 'n': the plan was refused: node '{node['id']}'.*'{name}'.*"
                                                 "allowed_credentials"):
        run_planner(plan_of(node))


def test_a_listed_credential_passes_the_planners_own_check() -> None:
    port = run_planner(plan_of(HTTP_WITH_SECRET), allowed_credentials=["crm_token"])
    assert port.recorded is not None


TOOL_OUTSIDE = {"id": "agent", "type": "llm", "config": {
    "provider": "scripted", "script": [{"text": "ok"}], "prompt": "go",
    "tools": [{"name": "t", "target": {"type": "python", "function": "noop"}}]}}


@pytest.mark.parametrize("node, where", [
    (TOOL_OUTSIDE, "tool 't'"),
    ({"id": "w", "type": "python", "config": {"function": "examples.lookup_order"}, "compensate": "noop"},
     "compensation"),
    ({"id": "w", "type": "python", "config": {"function": "examples.lookup_order"},
      "compensate": {"type": "python", "config": {"function": "noop"}}}, "compensation"),
])
def test_allowed_functions_bind_tool_targets_and_compensations(node: dict[str, Any], where: str) -> None:
    with pytest.raises(PermanentStepError, match=f"the plan was refused: node '{node['id']}'.*{where}.*'noop'"):
        run_planner(plan_of(node), allowed_functions=["examples.lookup_order"])


@pytest.mark.parametrize("kind, config", [
    ("planner", {"objective": "again", "provider": "scripted", "script": [{"text": "{}"}]}),
    ("subworkflow", {"workflow": "anything"}),
    ("human", {"prompt": "undo?"}),
])
def test_excluded_kinds_are_unreachable_through_compensate(kind: str, config: dict[str, Any]) -> None:
    node = {"id": "w", "type": "python", "config": {"function": "noop"}, "compensate": {"type": kind, "config": config}}
    with pytest.raises(PermanentStepError, match="the plan was refused: .*compensation may not be a"):
        run_planner(plan_of(node))
    # ...and at save, for every graph.
    assert any(i.field == "compensate.type" for i in validate(chain(node)))


@pytest.mark.django_db
def test_the_planner_node_checks_its_allowed_credentials_at_save() -> None:
    graph = chain({"id": "plan", "type": "planner", "config": {
        "objective": "x", "provider": "scripted", "script": [{"text": "{}"}], "allowed_credentials": ["nope"]}})
    assert [(i.node, i.field) for i in validate(graph)] == [("plan", "config.allowed_credentials")]
    credential = Credential(name="nope", kind="secret")
    credential.set_value("v")
    credential.save()
    assert validate(graph) == []


@pytest.mark.django_db
def test_a_subworkflow_may_not_name_a_generated_definition_at_save() -> None:
    graph = chain({"id": "sub", "type": "subworkflow", "config": {"workflow": "parent--plan-plan"}})
    with pytest.raises(GraphInvalid, match="generated"):
        save_version("caller", graph)


@pytest.mark.django_db
@pytest.mark.parametrize("slug, archived", [("old-one", True), ("parent--plan-plan", True),
                                            ("parent--plan-other", False)])
def test_a_subworkflow_may_not_start_an_archived_or_generated_definition(slug: str, archived: bool) -> None:
    from workflows.runtime.subflows import version_to_run

    definition = WorkflowDefinition.objects.create(slug=slug, name=slug, archived=archived)
    WorkflowVersion.objects.create(definition=definition, number=1, graph=chain())
    with pytest.raises(PermanentStepError, match="archived|generated"):
        version_to_run(slug, None)
