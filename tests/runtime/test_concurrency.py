"""max_concurrency: a per-instance limit on the steps queued, running or retrying at once.

In-process: jobs are captured instead of enqueued, and run one at a time here, so what the limit
lets out is counted exactly after each commit."""

from __future__ import annotations

from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.workflows.support import edge, py
from workflows import runtime
from workflows.models import StepRun

FAN = ["b1", "b2", "b3", "b4", "b5"]


def fan_out(limit: int | None) -> dict[str, Any]:
    nodes = [{"id": "start", "type": "start"}, *[py(b, "tests.echo") for b in FAN], py("join", "tests.echo"),
             {"id": "end", "type": "end"}]
    edges = [edge("start", b) for b in FAN] + [edge(b, "join") for b in FAN] + [edge("join", "end")]
    graph: dict[str, Any] = {"nodes": nodes, "edges": edges}
    if limit:
        graph["settings"] = {"max_concurrency": limit}
    return graph


def active(instance_id: int) -> int:
    return StepRun.objects.filter(instance_id=instance_id, status__in=("queued", "running", "retrying")).count()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_at_most_max_concurrency_steps_are_active(make_version, jobs, settings, store):
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    instance = runtime.start_instance(make_version(fan_out(2)), {})
    assert len(jobs) == 2 and active(instance.pk) == 2
    held = StepRun.objects.filter(instance_id=instance.pk, status="pending")
    assert sorted(held.values_list("node_id", flat=True)) == ["b3", "b4", "b5"]
    seen = []
    while jobs:
        step_id, _ = jobs.pop(0)
        runtime.run_step(step_id, "w")
        seen.append(active(instance.pk))
        assert active(instance.pk) <= 2
    instance.refresh_from_db()
    assert instance.status == "completed"
    assert StepRun.objects.filter(instance_id=instance.pk, status="succeeded").count() == 8
    # Each finished branch let exactly one held branch out until none were left.
    assert seen[:3] == [2, 2, 2]
    assert instance.state.get("throttled") == []


@pytest.mark.django_db(transaction=True)
def test_without_a_limit_every_branch_is_queued_at_once(make_version, jobs):
    instance = runtime.start_instance(make_version(fan_out(None)), {})
    assert len(jobs) == 5 and active(instance.pk) == 5


@pytest.mark.django_db(transaction=True)
def test_cancelling_drops_the_held_steps(make_version, jobs):
    instance = runtime.start_instance(make_version(fan_out(1)), {})
    assert runtime.cancel_instance(instance.pk)
    instance.refresh_from_db()
    assert instance.status == "cancelled" and "throttled" not in instance.state
    assert not StepRun.objects.filter(instance_id=instance.pk, status__in=("pending", "queued")).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_rerouting_cancels_the_held_steps_of_the_abandoned_path(make_version, jobs, settings, store):
    """A reroute abandons the held branches too: they are cancelled (with events) and never released."""
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    branches = ["b1", "b2", "b3"]
    graph: dict[str, Any] = {
        "nodes": [{"id": "start", "type": "start"}, py("a", "tests.echo"), py("x", "tests.echo"),
                  *[py(b, "tests.echo") for b in branches], {"id": "end", "type": "end", "join": "any"}],
        "edges": [edge("start", "a"), edge("a", "x"), edge("x", "end"),
                  *[edge("start", b) for b in branches], *[edge(b, "end") for b in branches]],
        # start, a and the three branches are 5 activations: x, after a, trips the loop breaker.
        "settings": {"max_concurrency": 1, "max_transitions": 5}}
    instance = runtime.start_instance(make_version(graph), {})
    (first,) = jobs
    assert StepRun.objects.get(pk=first[0]).node_id == "a"  # the critical path first; the branches held
    runtime.run_step(jobs.pop(0)[0], "w")
    instance.refresh_from_db()
    assert instance.status == "halted" and instance.halt_reason == "loop_breaker"
    assert sorted(node for node, _ in instance.state["throttled"]) == branches

    from django.contrib.auth.models import User

    from workflows.models import ReviewItem
    from workflows.operators.review import Decision, decide

    boss = User.objects.create_superuser("boss", "b@example.com", "x-very-long-password")
    decide(ReviewItem.objects.get(instance=instance, status="open").pk, boss,
           Decision(action="reroute", goto="x", extra_transitions=10))
    instance.refresh_from_db()
    assert instance.state.get("throttled", []) == []
    held = StepRun.objects.filter(instance_id=instance.pk, node_id__in=branches)
    assert sorted(held.values_list("status", flat=True)) == ["cancelled"] * 3
    cancelled = instance.events.filter(type="step_cancelled", node_id__in=branches)
    assert sorted(cancelled.values_list("node_id", flat=True)) == branches
    assert all(e.payload["reason"] == "rerouted to x" for e in cancelled)
    assert instance.open_steps == 1  # x

    while jobs:
        runtime.run_step(jobs.pop(0)[0], "w")
    instance.refresh_from_db()
    assert sorted(held.values_list("status", flat=True)) == ["cancelled"] * 3
    assert not instance.events.filter(type="step_started", node_id__in=branches).exists()
    assert instance.status == "completed", instance.error
    assert instance.open_steps == 0
