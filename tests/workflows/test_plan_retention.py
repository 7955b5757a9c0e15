"""The planner's generated plan versions (workflows/authoring/plans.py): which the scheduler's purge deletes — past
retention, run by no instance, their planning instance ended long enough ago, not their definition's
latest — and that what finished runs need is never deleted with them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from django.db.models import Max, ProtectedError
from django.utils import timezone

from tests.conftest import chain
from workflows import runtime
from workflows.authoring import plans
from workflows.models import Event, StepRun, WorkflowDefinition, WorkflowInstance, WorkflowVersion
from workflows.scheduler import reconciler

PLAN = chain({"id": "nap", "type": "wait", "config": {"seconds": 3600}})
DAY = timedelta(days=1)


@pytest.fixture
def parent(make_version: Any) -> WorkflowInstance:
    instance: WorkflowInstance = runtime.start_instance(make_version(PLAN, slug="orders"), {})
    return instance


def record(planner: WorkflowInstance | int, created_at: datetime, slug: str = "orders--plan-plan") -> WorkflowVersion:
    """A plan version as a planner step records it (workflows/runtime/subflows.py, record_plan)."""
    definition, _ = WorkflowDefinition.objects.get_or_create(
        slug=slug, defaults={"name": "Plans of plan", "archived": True})
    number = (definition.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    pk = planner if isinstance(planner, int) else planner.pk
    return WorkflowVersion.objects.create(
        definition=definition, number=number, created_at=created_at, message=f"plan {number}",
        graph={**PLAN, "planned": {"instance": pk, "node": "plan", "visit": 1, "objective": "x", "usage": {}}})


def end(instance: WorkflowInstance, at: datetime, status: str = "completed") -> None:
    WorkflowInstance.objects.filter(pk=instance.pk).update(status=status, finished_at=at, updated_at=at)


def left(*versions: WorkflowVersion) -> list[int]:
    return sorted(WorkflowVersion.objects.filter(pk__in=[v.pk for v in versions]).values_list("number", flat=True))


def test_only_orphans_past_retention_of_ended_parents_go_and_never_the_latest(parent: WorkflowInstance) -> None:
    now = timezone.now()
    old = [record(parent, now - 40 * DAY) for _ in range(3)]
    assert plans.purge(now) == 0, "the planning instance is still running"
    end(parent, now - 10 * DAY)
    assert plans.purge(now) == 0, "it ended less than the retention ago"
    end(parent, now - 31 * DAY, status="failed")
    assert plans.purge(now) == 2
    assert left(*old) == [3]  # the latest stays: its number is never given to another plan
    assert WorkflowDefinition.objects.filter(slug="orders--plan-plan").exists()
    assert plans.purge(now) == 0


def test_a_plan_any_instance_ran_on_is_kept_with_its_history(parent: WorkflowInstance) -> None:
    now = timezone.now()
    ran = record(parent, now - 60 * DAY)
    child = runtime.start_instance(ran, {})
    end(child, now - 59 * DAY)
    record(parent, now - 40 * DAY)  # the latest
    end(parent, now - 59 * DAY)
    steps, events = StepRun.objects.filter(instance=child).count(), Event.objects.filter(instance=child).count()
    assert plans.purge(now) == 0
    assert left(ran) == [1]
    assert (StepRun.objects.filter(instance=child).count(), Event.objects.filter(instance=child).count()) == (
        steps, events)
    # What keeps it: an instance PROTECTs its version, so deleting one can never cascade into a run's
    # steps and events.
    with pytest.raises(ProtectedError):
        ran.delete()


def test_recent_plans_and_other_definitions_are_kept(parent: WorkflowInstance, make_version: Any,
                                                     settings: Any) -> None:
    now = timezone.now()
    recent = record(parent, now - 5 * DAY)
    record(parent, now - 5 * DAY)
    end(parent, now - 100 * DAY)
    designed = make_version(PLAN, slug="orders")  # v2 of a designer's workflow, v1 never ran either
    assert plans.purge(now) == 0
    assert left(recent) == [1] and WorkflowVersion.objects.filter(definition=designed.definition).count() == 2
    settings.STEADYFLOW = {**settings.STEADYFLOW, "PLAN_RETENTION_DAYS": 2}
    assert plans.purge(now) == 1 and left(recent) == []


def test_a_plan_whose_planning_instance_is_gone_goes_after_retention(db: None) -> None:
    now = timezone.now()
    gone = record(987654, now - 31 * DAY)
    record(987654, now - 31 * DAY)
    assert plans.purge(now) == 1 and left(gone) == []


def test_a_parent_reopened_after_the_read_keeps_its_plan(parent: WorkflowInstance) -> None:
    """The candidates are read without locks; the parent is checked again under its row lock."""
    now = timezone.now()
    plan = record(parent, now - 40 * DAY)
    record(parent, now - 40 * DAY)
    end(parent, now - 40 * DAY)
    candidates = plans.purgeable(now)
    assert candidates == [(plan.pk, parent.pk)]
    WorkflowInstance.objects.filter(pk=parent.pk).update(status="running", finished_at=None)  # a rerun
    with mock.patch.object(plans, "purgeable", return_value=candidates):
        assert plans.purge(now) == 0
    assert left(plan) == [1]


def test_a_child_started_after_the_read_keeps_its_plan(parent: WorkflowInstance) -> None:
    now = timezone.now()
    plan = record(parent, now - 40 * DAY)
    record(parent, now - 40 * DAY)
    end(parent, now - 40 * DAY)
    candidates = plans.purgeable(now)
    runtime.start_instance(plan, {})
    with mock.patch.object(plans, "purgeable", return_value=candidates):
        assert plans.purge(now) == 0
    assert left(plan) == [1]


def test_the_scheduler_tick_purges_at_most_hourly(parent: WorkflowInstance, monkeypatch: Any) -> None:
    monkeypatch.setattr(plans.schedule, "next_at", None)
    now = timezone.now()
    plan = record(parent, now - 40 * DAY)
    record(parent, now - 40 * DAY)
    end(parent, now - 40 * DAY)
    later = record(parent, now - 40 * DAY)  # now plan 2 is an orphan too, plan 3 the latest
    assert reconciler.tick(now).plans_purged == 2
    assert left(plan) == [] and left(later) == [3]
    record(parent, now - 40 * DAY)
    assert reconciler.tick(now + timedelta(minutes=30)).plans_purged == 0
    assert reconciler.tick(now + timedelta(minutes=61)).plans_purged == 1
