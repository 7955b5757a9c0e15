"""Priorities set at start (docs/architecture.md, Priorities): the JSON API (one and bulk), run_workflow --priority,
schedules and webhooks; each checked, a bad one a 400 naming the field, and the priority reaching the
instance, its steps and the RQ queue its steps are enqueued on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_rq
import pytest
from django.core.management import CommandError
from django.utils import timezone

from tests.dashboard.test_api import START, assert_error, flow, operator, post_json  # noqa: F401 - fixtures
from tests.triggers.test_webhooks import ORDER, hook, post  # noqa: F401 - fixture
from tests.workflows.test_commands import run_json
from workflows.models import StepRun, WorkflowInstance
from workflows.triggers import schedules
from workflows.triggers.models import Webhook


def queued_on(name: str) -> list[str]:
    return django_rq.get_queue(name).get_job_ids()


def test_the_api_starts_at_a_priority_and_its_steps_go_on_that_queue(operator: Any, flow: Any, redis_conn: Any,  # noqa: F811, E501
                                                                     django_capture_on_commit_callbacks: Any
                                                                     ) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(operator, START.format(slug="api-flow"), {"input": {}, "priority": "high"})
    assert response.status_code == 201, response.content
    assert response.json()["priority"] == "high"
    instance = WorkflowInstance.objects.get(pk=response.json()["id"])
    step = StepRun.objects.get(instance=instance, node_id="work")
    assert instance.priority == step.priority == "high"
    assert queued_on("default:high") == [f"step-{step.pk}"] and queued_on("default") == []

    with django_capture_on_commit_callbacks(execute=True):
        bulk = post_json(operator, START.format(slug="api-flow") + "/bulk", {"inputs": [{}, {}], "priority": "low"})
    assert bulk.status_code == 201, bulk.content
    low = StepRun.objects.filter(node_id="work", priority="low").order_by("pk")
    assert [i["priority"] for i in bulk.json()["instances"]] == ["low", "low"]
    assert queued_on("default:low") == [f"step-{s.pk}" for s in low] and len(low) == 2
    # No priority: normal, the kind's own queue.
    post_json(operator, START.format(slug="api-flow"), {"input": {}})
    assert WorkflowInstance.objects.order_by("-pk").first().priority == "normal"  # type: ignore[union-attr]


def test_a_bad_priority_is_a_400_naming_the_field(operator: Any, flow: Any) -> None:  # noqa: F811
    url = START.format(slug="api-flow")
    for bad in ("urgent", 3, ["high"], ""):
        body = assert_error(post_json(operator, url, {"input": {}, "priority": bad}), 400, "priority")
        assert set(body["fields"]) == {"priority"}, body
        assert_error(post_json(operator, url + "/bulk", {"inputs": [{}], "priority": bad}), 400, "priority")
    assert WorkflowInstance.objects.count() == 0


@pytest.mark.django_db
def test_run_workflow_takes_a_priority(tmp_path: Any) -> None:
    from tests.workflows.test_commands import GREETING, run

    summary = run_json("run_workflow", str(GREETING), "--priority", "low")
    assert summary["priority"] == "low" == WorkflowInstance.objects.get(pk=summary["instance"]).priority
    with pytest.raises(CommandError, match="priority"):
        run("run_workflow", str(GREETING), "--priority", "urgent")
    lines = tmp_path / "inputs.jsonl"
    lines.write_text("{}\n{}\n")
    run("run_workflow", str(GREETING), "--inputs", str(lines), "--priority", "high")
    assert WorkflowInstance.objects.filter(priority="high").count() == 2


def test_a_schedule_starts_at_its_priority(make_version: Any) -> None:
    from tests.triggers.test_schedules import GRAPH

    version = make_version(GRAPH, slug="nightly")
    begin = datetime(2026, 5, 1, 10, 1, tzinfo=UTC)
    schedule = schedules.create(version.definition, "*/15 * * * *", "UTC", now=begin, priority="high")
    assert schedules.tick(datetime(2026, 5, 1, 10, 15, 1, tzinfo=UTC)) == 1
    assert WorkflowInstance.objects.get().priority == "high"
    with pytest.raises(ValueError, match="priority"):
        schedules.create(version.definition, "*/15 * * * *", "UTC", now=begin, priority="urgent")
    assert schedule.priority == "high"


def test_a_webhook_starts_at_its_priority(hook: Webhook) -> None:  # noqa: F811
    hook.priority = "low"
    hook.save(update_fields=["priority"])
    response = post(hook, ORDER)
    assert response.status_code == 202, response.content
    assert WorkflowInstance.objects.get(pk=response.json()["instance"]).priority == "low"
    assert timezone.now()
