"""Scenarios: a graph and what workers, the scheduler and operators do to an instance of it, with the
outcome each must reach whatever the store (those where an operator decides are in halts.py). Each
returns the instance id, for a snapshot.

test_runtime.py runs them on every store; test_equivalence.py runs each on the ORM and the SQL
store and compares the rows they wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from tests.store import graphs, halts
from tests.store.driver import Driver, snapshot, steps_of
from workflows.models import StepRun, WorkflowVersion


def chain(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version, {"x": 7})
    assert d.drain() == 3
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert inst.context == {"x": 7, "order": ["a", "b", "c"], "n": 3}
    assert [(s.node_id, s.status, s.attempt, s.worker) for s in steps_of(inst.pk) if s.node_type == "python"] == [
        ("a", "succeeded", 1, "w"), ("b", "succeeded", 1, "w"), ("c", "succeeded", 1, "w")]
    assert [s.output["arg"] for s in steps_of(inst.pk) if s.node_type == "python"] == [7, "a", 2]
    # Only the first step went through a queue: the others ran inline, claimed by the commit before.
    assert [StepRun.objects.get(pk=pk).node_id for pk, _ in d.captured.dispatched] == ["a"]
    return inst.pk


def fan_out_join(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    assert sorted(queue for _, queue in d.captured.queue) == ["default", "default", "io"]
    d.run_job(d.take("a"))
    assert not steps_of(inst.pk, "join"), "the join started before all its inputs finished"
    d.run_job(d.take("b"))
    assert d.run_job(d.take("c")) == 3  # c, then join and after inline
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert steps_of(inst.pk, "join")[0].output["seen"] == ["a", "b", "c"]
    assert inst.state["joins"] == {} or all(not v for v in inst.state["joins"].values())
    return inst.pk


def loop_any_join(d: Driver, version: WorkflowVersion) -> int:
    """Join records per round, persisted: round 2 of an `any` join starts while round 1's late branch
    is still queued, and each late branch later closes its own round's record."""
    inst = d.start(version)
    d.run_job(d.take("h"))
    assert d.run_job(d.take("a")) == 3  # a, then m (round 1) and h (round 2) inline
    assert d.run_job(d.take("a")) == 2  # a, then m (round 2), which ends the loop
    inst.refresh_from_db()
    assert inst.state["joins"] == {"m": {"edges": {"3": True}, "started": True,
                                         "next": [{"edges": {"3": True}, "started": True}]}}
    d.run_job(d.take("b"))
    inst.refresh_from_db()
    assert inst.state["joins"] == {"m": {"edges": {"3": True}, "started": True}}
    d.run_job(d.take("b"))
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert inst.state["joins"] == {}
    assert [len(steps_of(inst.pk, node)) for node in ("h", "a", "b", "m", "end")] == [2, 2, 2, 2, 1]
    return inst.pk


def interleaved(d: Driver, version: WorkflowVersion) -> int:
    """Two workers whose steps overlap: each commits after the other's transition moved the instance
    (on PostgreSQL the one-round-trip commit's guard fails and the locked path decides again)."""
    inst = d.start(version)
    first = d.claim(d.take("a"), "w1")
    assert first is not None
    first_outcome = d.run(first)
    second = d.claim(d.take("b"), "w2")
    assert second is not None
    second_outcome = d.run(second)
    assert d.finish(first, first_outcome) is None
    assert d.finish(second, second_outcome) is None
    assert d.drain() == 3
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert [(s.node_id, s.worker) for s in steps_of(inst.pk) if s.node_id in ("a", "b", "c")] == [
        ("a", "w1"), ("b", "w2"), ("c", "w")]
    assert steps_of(inst.pk, "join")[0].output["seen"] == ["a", "b", "c"]
    return inst.pk


def claim_after_deadline(d: Driver, version: WorkflowVersion) -> int:
    """A job claimed after its instance's deadline, before the scheduler expired it: the claim expires it."""
    inst = d.start(version, {"x": 1})
    job = d.take("a")
    d.clock.tick(61)
    assert d.claim(job) is None
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("halted", "ttl_expired")
    (a,) = steps_of(inst.pk, "a")
    assert (a.status, a.attempt) == ("pending", 1)
    return inst.pk


def timer(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    assert d.drain() == 2  # prep, and the timer inline: not due yet
    (pause,) = steps_of(inst.pk, "pause")
    assert (pause.status, pause.attempt) == ("pending", 0)
    assert d.promote(27) == 0  # 29 s after it was activated
    assert d.promote(1) == 1
    assert d.drain() == 2
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    pause.refresh_from_db()
    assert (pause.status, pause.attempt) == ("succeeded", 1)
    return inst.pk


def retries(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    (a,) = steps_of(inst.pk, "a")
    assert (a.status, a.attempt) == ("retrying", 1), (a.status, a.attempt, a.error)
    assert a.error["exception"] == "ValueError" and "Traceback" in a.error["traceback"]
    assert d.promote(4) == 0, "promoted before its backoff passed"
    assert d.promote(1) == 1
    d.drain()
    assert d.promote(10) == 1  # the backoff doubles
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    a.refresh_from_db()
    assert (a.status, a.attempt, a.error) == ("succeeded", 3, None)
    return inst.pk


def lease_expiry(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    lost = d.claim(d.take("slow"), "w1")
    assert lost is not None
    outcome = d.run(lost)  # ... and the worker dies before committing it
    assert d.reclaim(settings.STEADYFLOW["LEASE_S"] - 1) == 0
    assert d.reclaim(2) == 1
    (slow,) = steps_of(inst.pk, "slow")
    assert (slow.status, slow.error["code"]) == ("retrying", "lease_expired")
    assert d.promote(2) == 1
    claim = d.claim(d.take("slow"), "w2")
    assert claim is not None
    before = snapshot(inst.pk, d.captured)
    # The first worker comes back: its lease was taken over, so its outcome commits nothing.
    assert d.finish(lost, outcome) is None
    assert snapshot(inst.pk, d.captured) == before
    d.carry_on(claim)
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    slow.refresh_from_db()
    assert (slow.worker, slow.attempt) == ("w2", 2)
    return inst.pk


def compensation(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    assert d.run_job(d.take()) == 3  # reserve, charge, ship inline; ship fails for good
    inst.refresh_from_db()
    assert inst.status == "compensating"
    assert [(s.node_id, s.queue) for s in steps_of(inst.pk, None) if s.status == "queued"] == [
        ("compensate:charge", "io")]
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "compensated", inst.error
    assert {s.node_id: s.status for s in steps_of(inst.pk)} == {
        "start": "succeeded", "reserve": "compensated", "charge": "compensated", "ship": "failed",
        "compensate:charge": "succeeded", "compensate:reserve": "succeeded"}
    return inst.pk


def poison_step(d: Driver, version: WorkflowVersion) -> int:
    """The step's worker is lost on every attempt: after POISON_AFTER_LOSSES it is parked for a person."""
    inst = d.start(version)
    lease_s = settings.STEADYFLOW["LEASE_S"]
    losses = settings.STEADYFLOW["POISON_AFTER_LOSSES"]
    job = d.take("slow")
    for loss in range(1, losses + 1):
        claim = d.claim(job, f"doomed-{loss}")
        assert claim is not None
        assert d.reclaim(lease_s + 1) == 1
        if loss < losses:
            assert d.promote(60) == 1
            job = d.take("slow")
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("halted", "poison_step")
    (slow,) = steps_of(inst.pk, "slow")
    assert (slow.status, slow.attempt, slow.due_at) == ("pending", losses, None)
    d.decide(inst, "poison_step", action="retry", note="fixed the worker")
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    return inst.pk


def compensation_fails(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("halted", "compensation_failed")
    d.decide(inst, "compensation_failed", action="reject", note="undo by hand")
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("failed", "rejected")
    assert {s.node_id: s.status for s in steps_of(inst.pk)}["compensate:reserve"] == "cancelled"
    return inst.pk


def dead_end(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("failed", "dead_end"), (inst.status, inst.halt_reason, inst.error)
    assert inst.error["node"] == "c"  # the last to finish
    return inst.pk


def cancel(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.run_job(d.take("a"))
    assert d.cancel(inst)
    assert not d.cancel(inst), "cancelled twice"
    assert d.drain() == 0  # the jobs still queued claim nothing
    inst.refresh_from_db()
    assert (inst.status, inst.open_steps) == ("cancelled", 0)
    assert {s.node_id: s.status for s in steps_of(inst.pk)} == {
        "start": "succeeded", "a": "succeeded", "b": "cancelled", "c": "cancelled"}
    return inst.pk


def release(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version, {"x": 3})
    step_id = d.take("a")
    claim = d.claim(step_id, "w1")
    assert claim is not None
    assert d.release(claim)
    assert not d.release(claim), "released twice"
    a = StepRun.objects.get(pk=step_id)
    assert (a.status, a.attempt, a.worker, a.lease_token) == ("queued", 0, "", "")
    d.captured.queue.append((step_id, a.queue))  # the worker puts the job back on its queue
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    a.refresh_from_db()
    assert (a.attempt, a.worker) == (1, "w")
    return inst.pk


def subworkflow(d: Driver, version: WorkflowVersion) -> int:
    """The parent step starts its child and parks; the child's steps run; its end queues the parent
    step again (a post-commit effect), which maps the child's output."""
    from workflows.authoring.definitions import save_version
    from workflows.models import WorkflowDefinition, WorkflowInstance

    if not WorkflowDefinition.objects.filter(slug=graphs.SUB_CHILD).exists():
        save_version(graphs.SUB_CHILD, graphs.subworkflow_child())
    inst = d.start(version, {"x": 5})
    d.run_job(d.take("sub"))
    inst.refresh_from_db()
    assert inst.status == "waiting"
    [child] = WorkflowInstance.objects.filter(parent_step__instance_id=inst.pk)
    assert child.state["depth"] == 1 and child.input == {"x": 5}
    d.drain()
    inst.refresh_from_db()
    child.refresh_from_db()
    assert (inst.status, child.status) == ("completed", "completed"), (inst.status, child.status, d.captured.queue)
    assert inst.context["child"] == {"n": child.context["n"]}
    assert steps_of(inst.pk, "sub")[0].attempt == 1
    return inst.pk


def keyed_starts(driver: Driver, first: WorkflowVersion, second: WorkflowVersion) -> dict[str, Any]:
    """One key on two workflows, then again on each, singly and in bulk: what each start returned."""
    from workflows import runtime

    with driver.committing():
        a = runtime.start_instance(first, {"x": 1}, idempotency_key="order-1")
        b = runtime.start_instance(second, {"x": 2}, idempotency_key="order-1")
        a_again = runtime.start_instance(first, {"x": 3}, idempotency_key="order-1")
        b_again = runtime.start_instance(second, {"x": 4}, idempotency_key="order-1")
        bulk_a = runtime.start_instances(first, [{"x": 5}, {"x": 6}], idempotency_keys=["order-1", "order-2"])
        bulk_b = runtime.start_instances(second, [{"x": 7}, {"x": 8}], idempotency_keys=["order-2", "order-1"])
    return {"a": a, "b": b, "a_again": a_again, "b_again": b_again, "bulk_a": bulk_a, "bulk_b": bulk_b}


@dataclass(frozen=True)
class Scenario:
    graph: Callable[[], dict[str, Any]]
    run: Callable[[Driver, WorkflowVersion], int]
    # Whether a worker commits an outcome that opens no review item (on PostgreSQL, outside a
    # transaction, such a commit takes the one-round-trip path).
    fast_commits: bool = True


SCENARIOS = {
    "chain": Scenario(graphs.chain, chain),
    "poison_step": Scenario(graphs.lease, poison_step),
    "compensation_fails": Scenario(graphs.saga_that_cannot_undo, compensation_fails),
    "dead_end": Scenario(graphs.dead_end, dead_end),
    "example_loop_rejected": Scenario(graphs.seed_loop, halts.example_loop_rejected),
    "fan_out_join": Scenario(graphs.fan_out_join, fan_out_join),
    "interleaved": Scenario(graphs.fan_out_join, interleaved),
    "loop_any_join": Scenario(graphs.loop_any_join, loop_any_join),
    "router_loop": Scenario(graphs.router_loop, halts.router_loop),
    "budget_then_loop_breaker": Scenario(graphs.budget_loop, halts.budget_then_loop_breaker),
    "cost_budget": Scenario(graphs.cost_budget_loop, halts.cost_budget),
    "claim_after_deadline": Scenario(graphs.short_ttl, claim_after_deadline, fast_commits=False),
    "reroute": Scenario(graphs.router_loop, halts.reroute),
    "timer": Scenario(graphs.timer, timer),
    "human_rejects": Scenario(graphs.human_task, halts.human_rejects, fast_commits=False),
    "retries": Scenario(graphs.retries, retries),
    "lease_expiry": Scenario(graphs.lease, lease_expiry),
    "compensation": Scenario(graphs.saga, compensation),
    "human_task": Scenario(graphs.human_task, halts.human_task),
    "cancel": Scenario(graphs.fan_out_join, cancel),
    "ttl_expiry": Scenario(graphs.short_ttl, halts.ttl_expiry),
    "release": Scenario(graphs.chain, release),
    "subworkflow": Scenario(graphs.subworkflow, subworkflow),
}
