"""Committing what a claimed step came to, and what follows from it; or giving the step back.

Durability contract (docs/guarantees.md):
- every transition commits its StepRun, Event(s) and state delta (a snapshot when due:
  runtime/snapshots.py) in one transaction, with the instance row locked (joins, counters and
  the event sequence must not race);
- jobs are enqueued only after that commit, and carry only step ids;
- an outcome commits only while the claim's lease token still holds, so a duplicate delivery or a
  zombie worker whose lease was taken over commits nothing.
The outcomes of one instance's steps (one, a batch, or several instances' in a group commit) are
decided into a UnitOfWork (activation, step_outcomes, stopping, tool_calls, subflows) that the store
applies.
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal
from typing import Any

from workflows import clock
from workflows import store as stores
from workflows.engine.errors import ExpressionError, PayloadTooLarge, PermanentStepError
from workflows.engine.nodes import NodeResult
from workflows.engine.priorities import queue_name
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.engine.usage import step_tokens
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import effects, subflows, tool_calls
from workflows.runtime.activation import budget_exceeded, fired_edges, may_run, release_throttled, resolve
from workflows.runtime.compensation import compensate_next
from workflows.runtime.config import check_payload, check_payload_size, is_compensation
from workflows.runtime.observe import step_fields
from workflows.runtime.records import Claim, Outcome
from workflows.runtime.redaction import redacted_input
from workflows.runtime.step_outcomes import close_step, defer, fail_attempt, park_step
from workflows.runtime.stopping import halt
from workflows.runtime.unit import UnitOfWork
from workflows.store.orm import FinishRequest, is_spent

log = logging.getLogger("steadyflow.runtime")


def finish_step(claim: Claim, outcome: Outcome, *, allow_inline: bool = False,
                now: datetime | None = None) -> Claim | None:
    """Commit a step's outcome and what follows from it. Returns the successor claimed for inline
    running by this worker, when there is exactly one on the same queue."""
    inline = finish_steps([claim], [outcome], allow_inline=allow_inline, now=now)
    return inline[0] if inline else None


def finish_steps(claims: list[Claim], outcomes: list[Outcome], *, allow_inline: bool = False,
                 now: datetime | None = None) -> list[Claim]:
    """Commit the outcomes of steps of one instance in one transaction, under one instance lock, in
    order: a join their branches complete resolves in this commit. A step whose lease no longer
    holds commits nothing (and affects nothing else). Returns the successors claimed for inline
    running by this worker."""
    return finish_groups([(claims, outcomes)], allow_inline=allow_inline, now=now)[0]


def finish_groups(groups: list[tuple[list[Claim], list[Outcome]]], *, allow_inline: bool = False,
                  now: datetime | None = None) -> list[list[Claim]]:
    """finish_steps for several groups (each the steps of one instance) at once: a store may commit
    them all in one transaction (the ai consumer's group commit). Returns each group's inline
    successors."""
    now = now or clock.now()
    finishing = [_Finishing(claims, outcomes, allow_inline, now) for claims, outcomes in groups]
    try:
        results = stores.get_store().finish_group([f.request() for f in finishing])
        # The store has written (and committed, unless the caller holds a transaction) the units:
        # their effects run after COMMIT, at once when the store committed already.
        for done in results:
            if done.unit is not None:
                effects.after_commit(done.unit)
    except BaseException:
        for f in finishing:
            f.restore()
        raise
    return [f.conclude(done.held, done.result) for f, done in zip(finishing, results, strict=True)]


class _Finishing:
    """The outcomes of one instance's steps on their way to a commit: what the store needs (the
    leases, the instance this worker last committed, and `decide`) and what follows."""

    def __init__(self, claims: list[Claim], outcomes: list[Outcome], allow_inline: bool, now: datetime) -> None:
        self.claims = claims
        self.checked = [_checked(claim, outcome) for claim, outcome in zip(claims, outcomes, strict=True)]
        self.allow_inline = allow_inline
        self.now = now
        # Deciding changes the claimed steps in memory; a decision made again (the store lost a
        # race, or the commit is tried again on a new connection) starts from the steps as claimed.
        self.as_claimed = [dict(claim.step.__dict__) for claim in claims]

    def request(self) -> FinishRequest:
        claims = self.claims
        first = claims[0]
        fresh = first.instance if all(c.fresh and c.instance is first.instance for c in claims) else None
        if fresh is not None and is_spent(fresh):
            fresh = None
        return FinishRequest(first.instance.pk, [(c.step.pk, c.token) for c in claims], self.decide, fresh)

    def restore(self) -> None:
        for claim, saved in zip(self.claims, self.as_claimed, strict=True):
            claim.step.__dict__.update(saved)

    def decide(self, instance: WorkflowInstance, held: set[int]) -> tuple[UnitOfWork, list[Claim]]:
        self.restore()
        uow = UnitOfWork(instance, self.claims[0].graph, self.now)
        for claim in self.claims:
            uow.track(claim.step)
        inline: list[Claim] = []
        for claim, (outcome, output_json) in zip(self.claims, self.checked, strict=True):
            step = claim.step
            # Not ours any more, or changed by an earlier outcome of this batch (a failure cancels
            # the instance's other steps): nothing of this outcome commits.
            if step.pk not in held or step.status != StepStatus.RUNNING or step.lease_token != claim.token:
                continue
            if output_json is not None and outcome.result is not None:
                uow.remember_json(outcome.result.output, output_json)
            successor = _decide_outcome(uow, step, claim, outcome, self.allow_inline)
            if successor is not None:
                inline.append(successor)
        if uow.graph.settings.max_concurrency:
            release_throttled(uow)
        return uow, inline

    def conclude(self, held: set[int], inline: list[Claim] | None) -> list[Claim]:
        for claim, saved in zip(self.claims, self.as_claimed, strict=True):
            if claim.step.pk not in held:
                # Our lease was taken over (or the step was cancelled): the outcome must not commit.
                # The line names this step, not the one the worker ran last (`current_step`).
                claim.step.__dict__.update(saved)
                log.warning("step %s (node '%s'): lease lost, outcome discarded", claim.step.pk,
                            claim.step.node_id, extra=step_fields(claim))
        return inline or []


def _checked(claim: Claim, outcome: Outcome) -> tuple[Outcome, str | None]:
    """The payload limit on a successful output, serialised once (the check, the write); and no
    secret the step was given in what it produced (an echo the node did not scrub, a traceback)."""
    scope = claim.call.secrets if claim.call is not None else None
    if scope:
        if outcome.result is not None:
            outcome.result.output = scope.scrub(outcome.result.output)
            outcome.result.context_updates = scope.scrub(outcome.result.context_updates)
        if outcome.error is not None:
            scope.scrub_error(outcome.error)
    if (outcome.error is None and outcome.result is not None and outcome.result.defer_until is None
            and outcome.result.waiting_on is None):
        try:
            return outcome, check_payload(f"output of step {claim.node.id}", outcome.result.output)
        except PayloadTooLarge as exc:
            return Outcome(error=exc), None
    return outcome, None


def _decide_outcome(uow: UnitOfWork, step: StepRun, claim: Claim, outcome: Outcome,
                    allow_inline: bool) -> Claim | None:
    instance = uow.instance
    if not may_run(instance, step.node_id) and instance.status != InstanceStatus.HALTED:
        uow.checkpoint = False
        close_step(uow, step, StepStatus.CANCELLED, reason=f"instance is {instance.status}")
        return None
    if tool_calls.is_tool_step(step.node_id):
        tool_calls.finish_call(uow, step, claim, outcome)
        return None
    error = outcome.error
    if error is not None and error.code == "circuit_open":
        park_step(uow, step)
        halt(uow, "circuit_open", {"message": error.message, "node": step.node_id, **error.details}, step=step)
        return None
    if error is not None:
        fail_attempt(uow, step, claim, error)
        return None
    assert outcome.result is not None
    if outcome.result.defer_until is not None:
        uow.checkpoint = False
        defer(uow, step, outcome.result.defer_until)
        return None
    if outcome.result.waiting_on is not None:
        # Reads the child's status: decided under the instance lock only (see subflows.await_child).
        uow.needs_lock = True
        subflows.await_child(uow, step, claim, outcome.result.waiting_on)
        return None
    if outcome.result.tool_round is not None:
        tool_calls.start_round(uow, step, claim, outcome.result)
        return None
    return _succeed(uow, step, claim, outcome.result, allow_inline)


def _succeed(uow: UnitOfWork, step: StepRun, claim: Claim, result: NodeResult, allow_inline: bool) -> Claim | None:
    inst = uow.instance
    if is_compensation(step.node_id):
        uow.update_step(step, status=StepStatus.SUCCEEDED, output=result.output, finished_at=uow.now,
                        input=redacted_input(claim), error=None)
        uow.event("compensation_succeeded", step.node_id, step, visit=step.visit, attempt=step.attempt)
        compensate_next(uow, done=step)
        return None
    if result.context_updates:
        size = uow.context_size_with(result.context_updates)
        try:
            check_payload_size("context", size)
        except PayloadTooLarge as exc:
            fail_attempt(uow, step, claim, exc)
            return None
        uow.update_context({**inst.context, **result.context_updates}, result.context_updates, size)
    try:
        fired = fired_edges(uow, step.node_id, result.output)
    except ExpressionError as exc:
        # Names the edge and the reason; fail_attempt names the node.
        fail_attempt(uow, step, claim, PermanentStepError(str(exc)))
        return None
    usage = result.usage
    # An llm step's tool rounds counted their usage when they committed: only the rest counts now.
    added = tool_calls.usage_delta(step, usage)
    uow.update_step(step, status=StepStatus.SUCCEEDED, output=result.output, usage=usage, finished_at=uow.now,
                    input=redacted_input(claim), error=None, degraded=result.degraded)
    if added:
        # A sub-workflow reports its child's total as `tokens`; an llm node, prompt and completion.
        uow.set_instance(tokens=inst.tokens + step_tokens(added),
                         cost_usd=Decimal(inst.cost_usd) + Decimal(str(added.get("cost_usd", 0))))
    # usage and degraded only when there is something to say (the step row holds both anyway).
    shown: dict[str, Any] = {"usage": usage} if usage else {}
    if result.degraded:
        shown["degraded"] = True
    uow.event("step_succeeded", step.node_id, step, visit=step.visit, attempt=step.attempt,
              duration_ms=round((uow.now - step.started_at).total_seconds() * 1000, 2) if step.started_at else None,
              **shown)
    uow.set_instance(open_steps=inst.open_steps - 1)
    hold = budget_exceeded(inst) if usage else None
    return resolve(uow, step, fired, inline_queue=queue_name(step.queue, step.priority) if allow_inline else None,
                      worker=claim.worker, hold=hold)


def release_step(claim: Claim, reason: str, now: datetime | None = None) -> bool:
    """Give a claimed step back, queued again, without counting the attempt: its worker is stopping
    before the handler could finish (the ai consumer's shutdown). The caller puts the job back on
    its queue. False when the lease was no longer ours (then nothing changes)."""
    now = now or clock.now()
    store = stores.get_store()
    with store.atomic():
        instance, held = store.lock_for_finish(claim.instance.pk, claim.step.pk, claim.token)
        if not held:
            return False
        step = claim.step
        uow = UnitOfWork(instance, claim.graph, now, checkpoint=False)
        uow.update_step(step, status=StepStatus.QUEUED, attempt=step.attempt - 1, worker="", lease_token="",
                        lease_until=None, due_at=now)
        uow.event("step_queued", step.node_id, step, visit=step.visit, queue=step.queue,
                  released_by=claim.worker, reason=reason)
        effects.write(store, uow)
    return True
