"""A planner's generated plan instance is its step's work (issue 22): the dashboard counts one planned
run once, and the instance list links a child instance to the instance that started it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from dashboard.api.stats import compute_stats
from workflows import runtime
from workflows.models import StepRun, WorkflowDefinition, WorkflowInstance, WorkflowVersion

pytestmark = pytest.mark.django_db

GRAPH = {"nodes": [{"id": "start", "type": "start"}, {"id": "end", "type": "end"}],
         "edges": [{"source": "start", "target": "end"}]}


def test_a_plan_instance_is_not_counted_and_a_child_links_its_parent(make_version: Any, user_in: Any) -> None:
    parent = runtime.start_instance(make_version(GRAPH, slug="asks"), {})
    plan_definition = WorkflowDefinition.objects.create(slug="asks--plan-think", name="plan")
    plan_version = WorkflowVersion.objects.create(definition=plan_definition, number=1, graph=GRAPH)
    step = StepRun.objects.create(instance=parent, node_id="think", node_type="planner", visit=1, attempt=1,
                                  status="succeeded")
    child = WorkflowInstance.objects.create(version=plan_version, status="completed", parent_step=step,
                                            max_transitions=5, trace_id=parent.trace_id)
    counts = compute_stats()["counts"]
    assert sum(counts.values()) == 1  # the parent only
    client = Client()
    client.force_login(user_in("viewers", "vic"))
    html = client.get("/instances/").content.decode()
    assert f'child of <a href="/instances/{parent.pk}/">#{parent.pk}</a>' in html
    rows = client.get("/instances/", {"format": "json"}).json()["instances"]
    assert {r["id"]: r["parent"] for r in rows} == {child.pk: parent.pk, parent.pk: None}
