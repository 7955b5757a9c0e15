"""Scenarios in which an operator takes part: halts (loop breaker, budgets, TTL) decided in review,
and human tasks. Registered with the others in scenarios.py."""

from __future__ import annotations

from decimal import Decimal

from tests.store.driver import Driver, steps_of
from workflows.models import ReviewItem, WorkflowVersion


def router_loop(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("halted", "loop_breaker")
    assert inst.context["n"] == 2 and inst.tokens == 30 and inst.loop_count == 7
    d.decide(inst, "loop_breaker", extra_transitions=10, note="two more rounds")
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert inst.context["n"] == 4
    assert len(steps_of(inst.pk, "think")) == 4
    assert (inst.tokens, inst.cost_usd) == (60, Decimal("0.005"))
    assert inst.max_transitions == 17 and inst.loop_count == 14
    return inst.pk


def budget_then_loop_breaker(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason, inst.tokens) == ("halted", "budget_exceeded", 30)
    assert inst.state["resume"]["activate"] == ["check"]
    d.decide(inst, "budget_exceeded", extra_tokens=100)
    d.drain()
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("halted", "loop_breaker")
    d.decide(inst, "loop_breaker", extra_transitions=10)
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert (inst.tokens, inst.state["budget_tokens"], inst.context["n"]) == (60, 120, 4)
    return inst.pk


def example_loop_rejected(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version, {"ticket": "T-1"})
    d.drain()
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason, inst.loop_count) == ("halted", "loop_breaker", 10)
    item = ReviewItem.objects.get(instance=inst, reason="loop_breaker")
    path = item.details["path"]
    assert path[0] == "start" and set(path[1:]) == {"node_a", "node_b"} and len(path) == 10, path
    d.decide(inst, "loop_breaker", action="reject", note="it loops")
    assert d.drain() == 0
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("failed", "rejected")
    return inst.pk


def cost_budget(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason, inst.cost_usd) == ("halted", "budget_exceeded", Decimal("0.0025"))
    d.decide(inst, "budget_exceeded", extra_budget_usd="0.01")
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert (inst.budget_usd, inst.cost_usd) == (Decimal("0.012"), Decimal("0.005"))
    return inst.pk


def reroute(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    d.decide(inst, "loop_breaker", action="reroute", goto="end", note="enough")
    assert d.drain() == 0
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert inst.context["n"] == 2
    return inst.pk


def human_rejects(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    d.decide(inst, "human_task", action="reject", note="no")
    assert d.drain() == 0
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert inst.state["ended"] == "rejected"
    assert not steps_of(inst.pk, "pay")
    return inst.pk


def human_task(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version)
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "waiting"
    task = ReviewItem.objects.get(instance=inst, reason="human_task")
    assert task.details["prompt"] == "Pay 1?"
    d.decide(inst, "human_task", inputs={"amount": 12.5}, note="ok")
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert steps_of(inst.pk, "pay")[0].output["arg"] == 12.5
    assert steps_of(inst.pk, "approve")[0].worker == "olga"
    return inst.pk


def ttl_expiry(d: Driver, version: WorkflowVersion) -> int:
    inst = d.start(version, {"x": 1})
    claim = d.claim(d.take("a"), "w1")
    assert claim is not None
    outcome = d.run(claim)
    assert not d.expire(inst, 30), "expired before its deadline"
    assert d.expire(inst, 31)
    inst.refresh_from_db()
    assert (inst.status, inst.halt_reason) == ("halted", "ttl_expired")
    (a,) = steps_of(inst.pk, "a")
    assert (a.status, a.lease_token) == ("pending", "")
    # The running step was abandoned: what its worker brings back is discarded.
    assert d.finish(claim, outcome) is None
    d.decide(inst, "ttl_expired", extra_ttl_s=120)
    d.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    return inst.pk
