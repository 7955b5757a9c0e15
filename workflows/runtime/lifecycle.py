"""A step's life: start an instance, claim a step, run it, commit its outcome; and the other ways a
transition begins (release, cancel, expire).

Durability contract (README, "Guarantees"):
- every transition commits its StepRun, Event(s) and Checkpoint in one transaction, with the
  instance row locked (joins, counters and the event sequence must not race);
- jobs are enqueued only after that commit, and carry only step ids;
- a step is claimed by a conditional UPDATE (queued -> running with a fresh lease token) and its
  outcome commits only while that token still holds, so a duplicate delivery or a zombie worker
  whose lease was taken over commits nothing.
Each function here loads through the store, decides (transitions.py) into a UnitOfWork, and has the
store apply it.
"""

from __future__ import annotations

import logging
import secrets
from concurrent.futures import Executor
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from workflows import credentials
from workflows import store as stores
from workflows.engine import expressions
from workflows.engine.errors import ExpressionError, PayloadTooLarge, PermanentStepError
from workflows.engine.nodes import NodeResult, StepCall, get_kind
from workflows.engine.nodes.llm import provider_of
from workflows.engine.priorities import queue_name
from workflows.engine.statuses import INSTANCE_ACTIVE, InstanceStatus, StepStatus
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import subflows, tool_calls
from workflows.runtime import transitions as tx
from workflows.runtime.config import (
    check_payload,
    conf,
    engine_config,
    graph_for_version,
    is_compensation,
    node_for_step,
)
from workflows.runtime.observe import step_traceparent
from workflows.runtime.records import Claim, Outcome, StepOutputs
from workflows.runtime.unit import UnitOfWork
from workflows.store.orm import FinishRequest, is_spent

log = logging.getLogger("steadyflow.runtime")


# --- Claiming -----------------------------------------------------------------------------------

def claim_step(step_id: int, worker: str, now: datetime | None = None) -> Claim | None:
    """Take a queued step for this worker. None when someone else has it or it is no longer due."""
    now = now or timezone.now()
    token = secrets.token_hex(8)
    lease_until = now + timedelta(seconds=conf("LEASE_S"))
    store = stores.get_store()
    fast = store.claim_started(step_id, worker, token, now, lease_until)
    if fast is not None:
        step, instance = fast
    else:
        with store.atomic():
            step_or_none = store.claim_queued(step_id, worker, token, now, lease_until)
            if step_or_none is None:
                return None
            step = step_or_none
            instance = store.lock_instance(step.instance_id)
            if not _started(store, step, instance, worker, now):
                return None
    graph = graph_for_version(instance.version_id)
    node = node_for_step(graph, step.node_id)
    # The instance as this claim committed it: the outcome may be written against it directly.
    return Claim(step=step, instance=instance, graph=graph, node=node, kind=get_kind(node.type), token=token,
                 worker=worker, fresh=True)


def claim_steps(step_ids: list[int], worker: str, now: datetime | None = None) -> list[Claim]:
    """Take several queued steps (a batch job's, of one instance; or the ai consumer's jobs, of many)
    under one lease token: one statement where the store can; the steps it could not claim so go
    the general way, one by one. The claims come in the order of `step_ids`; the steps of one
    instance share one instance object."""
    if len(step_ids) == 1:
        single = claim_step(step_ids[0], worker, now)
        return [single] if single is not None else []
    now = now or timezone.now()
    token = secrets.token_hex(8)
    store = stores.get_store()
    claims: list[Claim] = []
    for instance, steps in store.claim_batch(step_ids, worker, token, now, now + timedelta(seconds=conf("LEASE_S"))):
        graph = graph_for_version(instance.version_id)
        for step in steps:
            node = node_for_step(graph, step.node_id)
            claims.append(Claim(step=step, instance=instance, graph=graph, node=node, kind=get_kind(node.type),
                                token=token, worker=worker, fresh=True))
    taken = {claim.step.pk: claim for claim in claims}
    ordered: list[Claim] = []
    for step_id in step_ids:
        claim = taken.get(step_id) or claim_step(step_id, worker, now)
        if claim is not None:
            ordered.append(claim)
    return ordered


def _started(store: Any, step: StepRun, instance: WorkflowInstance, worker: str, now: datetime) -> bool:
    """The claim's checks on the locked instance; False when the step must not run now."""
    uow = UnitOfWork(instance, graph_for_version(instance.version_id), now, checkpoint=False)
    if instance.status == InstanceStatus.HALTED:
        # A job that was already on its queue when the instance halted: park the step again
        # (the claim's attempt is given back) until an operator resumes the instance.
        uow.update_step(step, status=StepStatus.PENDING, due_at=None, lease_token="", lease_until=None,
                        attempt=step.attempt - 1)
        store.apply(uow)
        return False
    if not tx.may_run(instance, step.node_id):
        tx.close_step(uow, step, StepStatus.CANCELLED, reason=f"instance is {instance.status}")
        store.apply(uow)
        return False
    if instance.deadline and now > instance.deadline:
        uow.checkpoint = True
        tx.expire(uow)
        store.apply(uow)
        return False
    uow.event("step_started", step.node_id, step, visit=step.visit, attempt=step.attempt, worker=worker,
              queue=step.queue)
    store.apply(uow)
    return True


# --- Running ------------------------------------------------------------------------------------

def build_call(claim: Claim, now: datetime | None = None, offload: Executor | None = None) -> StepCall:
    """Render the node's config against the instance and make the handler's argument. `offload`:
    where its blocking helpers run off the event loop (StepCall.offload)."""
    now = now or timezone.now()
    inst, node, kind = claim.instance, claim.node, claim.kind
    steps = StepOutputs(inst.pk)
    names = {"context": inst.context, "steps": steps, "input": inst.input}
    if tool_calls.is_tool_step(node.id):
        names.update(tool_calls.call_names(claim.step))
    raw = node.config
    # `{{ secrets.NAME }}` become this attempt's placeholders before rendering: the renderer never
    # sees a value, and the config the step records holds none (workflows/credentials.py).
    scope, account = credentials.for_node(node, kind.raw_config_keys)
    try:
        config = {key: (value if key in kind.raw_config_keys
                        else expressions.render(scope.protect(value) if scope is not None else value, names))
                  for key, value in raw.items()}
    except ExpressionError as exc:
        raise PermanentStepError(f"node '{node.id}': template failed: {exc}") from None
    if tool_calls.is_tool_step(node.id):
        config = tool_calls.call_config(claim.step, node, config)
    rounds = tool_calls.rounds_of(claim.step) if node.type == "llm" else []
    call_index = 0
    if node.type == "llm" and provider_of(raw, engine_config().llm_default_provider) == "scripted":
        earlier = stores.get_store().earlier_attempts(inst.pk, node.id, claim.step.visit)
        # Each answered tool round was one call (its attempt was given back).
        call_index = earlier + claim.step.attempt - 1 + len(rounds)
    gate = None
    if node.type == "llm":
        from workflows.breakers import DatabaseBreaker, provider_key

        gate = DatabaseBreaker(provider_key(config, account))
    response_cache = None
    if node.type == "llm" and raw.get("cache"):
        # Only a node that opts in gets one: the others never query the cache table.
        from workflows.llm_cache import DatabaseCache

        response_cache = DatabaseCache(inst.definition_id, node.id, claim.step.pk, inst.pk)
    call = StepCall(
        node=node, config=config, context=inst.context, steps=steps, start_input=inst.input,
        instance_id=inst.pk, visit=claim.step.visit, attempt=claim.step.attempt,
        idempotency_key=claim.step.idempotency_key, now=now,
        # The step's own span in the instance's trace (runtime/observe.py): what http and llm nodes send.
        trace_id=step_traceparent(inst.trace_id, claim.step.pk, claim.step.attempt),
        activated_at=claim.step.created_at, engine=engine_config(), call_index=call_index, breaker=gate,
        offload=offload, secrets=scope, provider=account, cache=response_cache, tool_rounds=rounds,
        subflows=subflows.StepSubflows(claim) if claim.kind.starts_children else None,
    )
    claim.call = call
    return call


def timeout_for(claim: Claim) -> float:
    return float(claim.node.timeout_s or conf("DEFAULT_STEP_TIMEOUT_S"))


# --- Finishing ----------------------------------------------------------------------------------

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
    now = now or timezone.now()
    finishing = [_Finishing(claims, outcomes, allow_inline, now) for claims, outcomes in groups]
    try:
        results = stores.get_store().finish_group([f.request() for f in finishing])
    except BaseException:
        for f in finishing:
            f.restore()
        raise
    return [f.conclude(held, inline) for f, (held, inline) in zip(finishing, results, strict=True)]


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
            tx.release_throttled(uow)
        return uow, inline

    def conclude(self, held: set[int], inline: list[Claim] | None) -> list[Claim]:
        for claim, saved in zip(self.claims, self.as_claimed, strict=True):
            if claim.step.pk not in held:
                # Our lease was taken over (or the step was cancelled): the outcome must not commit.
                claim.step.__dict__.update(saved)
                log.warning("step %s: lease lost, outcome discarded", claim.step.pk)
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
    if not tx.may_run(instance, step.node_id) and instance.status != InstanceStatus.HALTED:
        uow.checkpoint = False
        tx.close_step(uow, step, StepStatus.CANCELLED, reason=f"instance is {instance.status}")
        return None
    if tool_calls.is_tool_step(step.node_id):
        tool_calls.finish_call(uow, step, claim, outcome)
        return None
    error = outcome.error
    if error is not None and error.code == "circuit_open":
        tx.park_step(uow, step)
        tx.halt(uow, "circuit_open", {"message": error.message, "node": step.node_id, **error.details}, step=step)
        return None
    if error is not None:
        tx.fail_attempt(uow, step, claim, error)
        return None
    assert outcome.result is not None
    if outcome.result.defer_until is not None:
        uow.checkpoint = False
        tx.defer(uow, step, outcome.result.defer_until)
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
                        input=tx.redacted_input(claim), error=None)
        uow.event("compensation_succeeded", step.node_id, step, visit=step.visit, attempt=step.attempt)
        tx.compensate_next(uow, done=step)
        return None
    if result.context_updates:
        new_context = {**inst.context, **result.context_updates}
        try:
            check_payload("context", new_context)
        except PayloadTooLarge as exc:
            tx.fail_attempt(uow, step, claim, exc)
            return None
        uow.set_instance(context=new_context)
    try:
        fired = tx.fired_edges(uow, step.node_id, result.output)
    except ExpressionError as exc:
        # Names the edge and the reason; fail_attempt names the node.
        tx.fail_attempt(uow, step, claim, PermanentStepError(str(exc)))
        return None
    usage = result.usage
    # An llm step's tool rounds counted their usage when they committed: only the rest counts now.
    added = tool_calls.usage_delta(step, usage)
    uow.update_step(step, status=StepStatus.SUCCEEDED, output=result.output, usage=usage, finished_at=uow.now,
                    input=tx.redacted_input(claim), error=None, degraded=result.degraded)
    if added:
        # A sub-workflow reports its child's total as `tokens`; an llm node, prompt and completion.
        tokens = int(added["tokens"]) if "tokens" in added else (
            int(added.get("prompt_tokens", 0)) + int(added.get("completion_tokens", 0)))
        uow.set_instance(tokens=inst.tokens + tokens,
                         cost_usd=Decimal(inst.cost_usd) + Decimal(str(added.get("cost_usd", 0))))
    uow.event("step_succeeded", step.node_id, step, visit=step.visit, attempt=step.attempt,
              duration_ms=round((uow.now - step.started_at).total_seconds() * 1000, 2) if step.started_at else None,
              usage=usage, degraded=result.degraded)
    uow.set_instance(open_steps=inst.open_steps - 1)
    hold = tx.budget_exceeded(inst) if usage else None
    return tx.resolve(uow, step, fired, inline_queue=queue_name(step.queue, step.priority) if allow_inline else None,
                      worker=claim.worker, hold=hold)


def release_step(claim: Claim, reason: str, now: datetime | None = None) -> bool:
    """Give a claimed step back, queued again, without counting the attempt: its worker is stopping
    before the handler could finish (the ai consumer's shutdown). The caller puts the job back on
    its queue. False when the lease was no longer ours (then nothing changes)."""
    now = now or timezone.now()
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
        store.apply(uow)
    return True


# --- Stopping from outside ----------------------------------------------------------------------

def expire_instance(instance_id: int, now: datetime | None = None) -> bool:
    """TTL: stop an instance past its deadline. False when it was already final or not yet due."""
    now = now or timezone.now()
    store = stores.get_store()
    with store.atomic():
        inst = store.lock_instance(instance_id)
        if inst.status not in INSTANCE_ACTIVE or not inst.deadline or inst.deadline >= now:
            return False
        uow = UnitOfWork(inst, graph_for_version(inst.version_id), now)
        tx.expire(uow)
        store.apply(uow)
    return True


def cancel_instance(instance_id: int, reason: str = "cancelled by request", now: datetime | None = None) -> bool:
    now = now or timezone.now()
    store = stores.get_store()
    with store.atomic():
        inst = store.lock_instance(instance_id)
        if inst.status not in INSTANCE_ACTIVE and inst.status != InstanceStatus.HALTED:
            return False
        uow = UnitOfWork(inst, graph_for_version(inst.version_id), now)
        tx.stop_instance(uow, InstanceStatus.CANCELLED, "cancelled", {"message": reason})
        store.apply(uow)
    return True


# --- Operators' actions: a transition begun outside the runtime -------------------------------

def lock(instance_id: int) -> WorkflowInstance:
    """Lock an instance for a transition (inside the caller's transaction)."""
    return stores.get_store().lock_instance(instance_id)


def apply(uow: UnitOfWork) -> None:
    """Write a unit of work decided on an instance locked with `lock` (inside the same transaction)."""
    stores.get_store().apply(uow)
