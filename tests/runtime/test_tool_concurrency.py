"""max_concurrency and the loop breaker for an llm node's tool calls (workflows/runtime/tool_calls.py).

In-process, as tests/runtime/test_concurrency.py: jobs are captured instead of enqueued and run one
at a time here, so what the limit lets out is counted exactly after each commit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.workflows.support import assert_history_consistent, edge, events, py
from workflows import runtime
from workflows.models import ReviewItem, StepRun, WorkflowInstance
from workflows.scheduler import reconciler

pytestmark = pytest.mark.django_db(transaction=True)

TOOL = {"name": "echo", "parameters": {"type": "object"}, "target": {"type": "python", "function": "tests.echo"}}
CALLS = ["c1", "c2", "c3", "c4"]
ASK = {"text": "four lookups", "tool_calls": [{"id": c, "name": "echo", "args": {"n": c}} for c in CALLS]}
ANSWER = {"text": "done"}


def agent(script: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": "agent", "type": "llm", "retry": {"max_attempts": 3, "backoff_s": 0},
            "config": {"provider": "scripted", "prompt": "go", "tools": [TOOL], "script": script or [ASK, ANSWER]}}


@pytest.fixture(params=["orm", "sql"])
def store(request: pytest.FixtureRequest, settings: Any) -> str:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": request.param}
    return str(request.param)


def active(instance_id: int) -> int:
    return StepRun.objects.filter(instance_id=instance_id, status__in=("queued", "running", "retrying")).count()


def tool_steps(instance_id: int, status: str) -> list[str]:
    rows = StepRun.objects.filter(instance_id=instance_id, node_id__startswith="tool:", status=status)
    return sorted(row.input["call_id"] for row in rows)


def run_all(jobs: list[tuple[int, str]], instance_id: int, limit: int) -> list[int]:
    seen = []
    while jobs:
        step_id, _ = jobs.pop(0)
        runtime.run_step(step_id, "w")
        seen.append(active(instance_id))
        assert seen[-1] <= limit, f"{seen[-1]} steps active at once, over max_concurrency {limit}"
    return seen


def test_tool_steps_past_max_concurrency_are_held_and_start_as_others_finish(make_version, jobs, store):
    instance = runtime.start_instance(make_version(chain(agent(), settings={"max_concurrency": 2})), {})
    (agent_job,) = jobs
    runtime.run_step(jobs.pop(0)[0], "w")
    # The llm step waits (its slot given up): two calls take the two slots, two are held.
    assert len(jobs) == 2 and active(instance.pk) == 2
    assert tool_steps(instance.pk, "queued") == ["c1", "c2"]
    assert tool_steps(instance.pk, "pending") == ["c3", "c4"]
    instance.refresh_from_db()
    held = StepRun.objects.filter(instance_id=instance.pk, status="pending", node_id__startswith="tool:")
    assert sorted(instance.state["throttled"]) == sorted([s.node_id, s.visit] for s in held)
    assert all(s.due_at is None for s in held)
    pending = [e for e in events(instance, "step_pending") if e.node_id.startswith("tool:")]
    assert len(pending) == 2 and all(e.payload["throttled"] and e.payload["parent"] == "agent" for e in pending)

    seen = run_all(jobs, instance.pk, 2)
    instance.refresh_from_db()
    assert instance.status == "completed", instance.error
    # Each of the first two finished calls let one held call out; the last queued the llm step again.
    assert seen[:2] == [2, 2]
    assert tool_steps(instance.pk, "succeeded") == CALLS
    out = StepRun.objects.get(instance_id=instance.pk, node_id="agent").output
    assert out["text"] == "done" and {c["id"]: c["result"]["n"] for c in out["tool_calls"]} == {c: c for c in CALLS}
    released = [e for e in events(instance, "step_queued") if e.payload.get("throttled")]
    assert len(released) == 2
    assert instance.state["throttled"] == [] and instance.open_steps == 0
    assert_history_consistent(instance)


def test_held_tool_calls_queue_behind_held_branches_and_share_the_limit(make_version, jobs, store):
    """Other branches and the agent's calls count against one limit; held steps go out oldest first."""
    graph: dict[str, Any] = {
        "nodes": [{"id": "start", "type": "start"}, agent(), py("b1", "tests.echo"), py("b2", "tests.echo"),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "agent"), edge("start", "b1"), edge("start", "b2"), edge("agent", "end"),
                  edge("b1", "end"), edge("b2", "end")],
        "settings": {"max_concurrency": 2}}
    instance = runtime.start_instance(make_version(graph), {})
    assert len(jobs) == 2
    queued = dict(StepRun.objects.filter(pk__in=[pk for pk, _ in jobs]).values_list("node_id", "pk"))
    assert "agent" in queued
    jobs[:] = [job for job in jobs if job[0] == queued["agent"]] + [job for job in jobs if job[0] != queued["agent"]]
    runtime.run_step(jobs.pop(0)[0], "w")
    # One branch runs and one was held at start: one call takes the agent's slot, three are held after it.
    assert active(instance.pk) == 2 and len(tool_steps(instance.pk, "queued")) == 1
    instance.refresh_from_db()
    assert [node for node, _ in instance.state["throttled"]][0] in ("b1", "b2")
    run_all(jobs, instance.pk, 2)
    instance.refresh_from_db()
    assert instance.status == "completed", instance.error
    assert tool_steps(instance.pk, "succeeded") == CALLS
    assert_history_consistent(instance)


def test_held_tool_steps_survive_a_worker_that_died(make_version, jobs, store):
    """The held list and the held steps are committed with the round: a crashed worker's tool step is
    reclaimed and retried, and the held calls still start as the others finish."""
    instance = runtime.start_instance(make_version(chain(agent(), settings={"max_concurrency": 2})), {})
    runtime.run_step(jobs.pop(0)[0], "w")
    (first, _), (second, _) = jobs
    jobs.clear()
    assert runtime.claim_step(first, "dying") is not None  # the worker dies holding it
    runtime.run_step(second, "w")
    # One held call went out in the finished one's slot; the dead worker's still counts.
    assert active(instance.pk) == 2 and len(tool_steps(instance.pk, "pending")) == 1
    instance = WorkflowInstance.objects.get(pk=instance.pk)
    assert len(instance.state["throttled"]) == 1

    StepRun.objects.filter(pk=first).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert reconciler.reclaim_expired_leases(timezone.now()) == 1
    assert StepRun.objects.get(pk=first).status == "retrying"
    assert reconciler.promote_due(timezone.now()) == 1  # no backoff: due at once
    run_all(jobs, instance.pk, 2)
    instance.refresh_from_db()
    assert instance.status == "completed", instance.error
    assert tool_steps(instance.pk, "succeeded") == CALLS
    assert StepRun.objects.get(pk=first).attempt == 2
    assert instance.state["throttled"] == []


def test_each_tool_call_counts_as_an_activation_for_the_loop_breaker(make_version, jobs, store):
    # start and agent (2), then the round: the llm step's next attempt and its four tool steps (7).
    graph = chain(agent(), settings={"max_concurrency": 2, "max_transitions": 6})
    instance = runtime.start_instance(make_version(graph), {})
    runtime.run_step(jobs.pop(0)[0], "w")
    instance.refresh_from_db()
    assert instance.status == "halted" and instance.halt_reason == "loop_breaker"
    assert instance.loop_count == 7
    assert "tool round 1 of node 'agent' (4 tool call(s))" in instance.error["message"]
    # Nothing runs: the two queued calls were parked by the halt, the other two stay held.
    assert active(instance.pk) == 0 and len(tool_steps(instance.pk, "pending")) == 4
    assert len(instance.state["throttled"]) == 2

    from django.contrib.auth.models import User

    from workflows.operators.review import Decision, decide

    boss = User.objects.create_superuser("boss", "b@example.com", "x-very-long-password")
    decide(ReviewItem.objects.get(instance=instance, status="open").pk, boss, Decision(action="approve"))
    jobs[:] = [job for job in jobs if StepRun.objects.get(pk=job[0]).status == "queued"]
    # Resumed: the parked calls queued again, the held ones still wait for their slots.
    assert active(instance.pk) == 2
    run_all(jobs, instance.pk, 2)
    instance.refresh_from_db()
    assert instance.status == "completed", instance.error
    assert instance.loop_count == 8 and tool_steps(instance.pk, "succeeded") == CALLS


def test_rerouting_a_halted_agent_cancels_its_held_tool_steps(make_version, jobs, store):
    graph = chain(agent(), py("after", "tests.echo"), settings={"max_concurrency": 1, "max_transitions": 6})
    instance = runtime.start_instance(make_version(graph), {})
    runtime.run_step(jobs.pop(0)[0], "w")
    instance.refresh_from_db()
    assert instance.status == "halted" and len(instance.state["throttled"]) == 3
    jobs.clear()

    from django.contrib.auth.models import User

    from workflows.operators.review import Decision, decide

    boss = User.objects.create_superuser("boss", "b@example.com", "x-very-long-password")
    decide(ReviewItem.objects.get(instance=instance, status="open").pk, boss,
           Decision(action="reroute", goto="after", extra_transitions=10))
    instance.refresh_from_db()
    assert instance.state["throttled"] == []
    assert tool_steps(instance.pk, "cancelled") == CALLS
    assert StepRun.objects.get(instance_id=instance.pk, node_id="agent").status == "cancelled"
    run_all(jobs, instance.pk, 1)
    instance.refresh_from_db()
    assert instance.status == "completed", instance.error
    assert instance.open_steps == 0
