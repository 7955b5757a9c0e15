"""The executor: starts instances, claims steps, runs handlers and commits their outcomes.

Durability contract (../README.md, "Guarantees"):
- every transition commits its StepRun, Event(s) and Checkpoint in one transaction, with the
  instance row locked (joins, counters and the event sequence must not race);
- jobs are enqueued only after that commit (transaction.on_commit), and carry only step ids;
- a step is claimed by a conditional UPDATE (queued -> running with a fresh lease token) and its
  outcome commits only while that token still holds, so a duplicate delivery or a zombie worker
  whose lease was taken over commits nothing.
"""

from __future__ import annotations

import json
import logging
import secrets
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from workflows import dispatch
from workflows.engine import expressions
from workflows.engine.errors import (
    ExpressionError,
    PayloadTooLarge,
    PermanentStepError,
    StepError,
)
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes import EngineConfig, NodeKind, NodeResult, StepCall, get_kind
from workflows.engine.retry import RetryPolicy
from workflows.engine.scheduling import advance, count_activations, edges_fired
from workflows.engine.statuses import (
    INSTANCE_ACTIVE,
    STEP_OPEN,
    InstanceStatus,
    StepStatus,
    check_instance_transition,
)
from workflows.models import Checkpoint, Event, StepRun, WorkflowInstance, WorkflowVersion
from workflows.timeouts import Heartbeat, time_limit

log = logging.getLogger("steadyflow.executor")

TRAIL_LENGTH = 50
TRACEBACK_CHARS = 4000
_SECRET_HEADER_WORDS = ("authorization", "key", "token", "secret", "password", "cookie")


def conf(name: str) -> Any:
    return settings.STEADYFLOW[name]


@lru_cache(maxsize=1)
def engine_config() -> EngineConfig:
    return EngineConfig(
        http_allowlist=tuple(conf("HTTP_ALLOWLIST")),
        llm_base_url=conf("LLM_BASE_URL"),
        llm_api_key=conf("LLM_API_KEY"),
        llm_max_per_provider=conf("LLM_MAX_PER_PROVIDER"),
        llm_prices=settings.STEADYFLOW.get("LLM_PRICES", {}),
        default_timeout_s=conf("DEFAULT_STEP_TIMEOUT_S"),
    )


@lru_cache(maxsize=256)
def graph_for_version(version_id: int) -> Graph:
    """Versions are immutable, so each process parses a version's graph once."""
    return WorkflowVersion.objects.only("graph").get(pk=version_id).as_graph()


def queue_for(node: Node, kind: NodeKind) -> str:
    return node.queue or kind.default_queue


COMPENSATE_PREFIX = "compensate:"


def compensation_node(node: Node) -> Node | None:
    """The action that undoes a node's effect (saga), as a node of its own; None if it declares none.

    `compensate` is a python function name, or {"type", "config", "retry", "timeout_s", "queue"}.
    """
    spec = node.compensate
    if not spec:
        return None
    if isinstance(spec, str):
        spec = {"type": "python", "config": {"function": spec}}
    return Node(id=COMPENSATE_PREFIX + node.id, type=spec.get("type", "python"),
                config=dict(spec.get("config") or {}), queue=spec.get("queue") or node.queue,
                retry=dict(spec.get("retry") or {"max_attempts": 3}), timeout_s=spec.get("timeout_s"), raw=spec)


def node_for_step(graph: Graph, node_id: str) -> Node:
    if node_id.startswith(COMPENSATE_PREFIX):
        node = compensation_node(graph.nodes[node_id[len(COMPENSATE_PREFIX):]])
        assert node is not None
        return node
    return graph.nodes[node_id]


# --- Writing state ------------------------------------------------------------------------------

class Transition:
    """Collects the writes of one transaction on a locked instance: events, new steps, the
    checkpoint and the jobs to enqueue after commit."""

    def __init__(self, instance: WorkflowInstance, graph: Graph, now: datetime) -> None:
        self.instance = instance
        self.graph = graph
        self.now = now
        self.events: list[Event] = []
        self.enqueue: list[tuple[int, str]] = []
        self.instance_fields: set[str] = {"event_seq", "updated_at"}

    def event(self, type_: str, node_id: str = "", step: StepRun | None = None, **payload: Any) -> None:
        self.instance.event_seq += 1
        self.events.append(Event(
            instance=self.instance, seq=self.instance.event_seq, type=type_, node_id=node_id,
            step=step, payload=payload, trace_id=self.instance.trace_id, created_at=self.now,
        ))

    def set_instance(self, **values: Any) -> None:
        target = values.get("status")
        if target is not None and target != self.instance.status:
            # The one transition table (engine/statuses.py) guards every status change.
            check_instance_transition(self.instance.status, target)
        for name, value in values.items():
            setattr(self.instance, name, value)
        self.instance_fields.update(values)

    def commit(self, checkpoint: bool = True) -> None:
        """Write the instance, events and checkpoint; schedule enqueues and live updates after commit."""
        self.instance.updated_at = self.now
        self.instance.save(update_fields=sorted(self.instance_fields))
        Event.objects.bulk_create(self.events)
        if checkpoint:
            state = {
                "context": self.instance.context,
                "state": self.instance.state,
                "loop_count": self.instance.loop_count,
                "open_steps": self.instance.open_steps,
                "status": self.instance.status,
                "seq": self.instance.event_seq,
            }
            Checkpoint.objects.create(instance=self.instance, seq=self.instance.event_seq, state=state,
                                      checksum=Checkpoint.checksum_of(state), created_at=self.now)
        if self.enqueue:
            jobs = list(self.enqueue)
            transaction.on_commit(lambda: dispatch.enqueue_steps(jobs))
        if self.events:
            from workflows import live

            messages = [event.as_message() for event in self.events]
            transaction.on_commit(lambda: live.publish(messages))


def _lock_instance(instance_id: int) -> WorkflowInstance:
    # The row lock serialises every transition of one instance: joins, loop counter, event seq.
    return WorkflowInstance.objects.select_for_update().get(pk=instance_id)


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def _check_payload(what: str, value: Any) -> None:
    limit = conf("MAX_PAYLOAD_BYTES")
    size = _json_size(value)
    if size > limit:
        raise PayloadTooLarge(f"{what} is {size} bytes, over the limit of {limit} bytes "
                              "(STEADYFLOW_MAX_PAYLOAD_BYTES)")


def _new_step(tr: Transition, node_id: str, *, claim_for: str | None = None,
              token: str = "", park: bool = False) -> StepRun:
    """Activate a node: a new visit, queued (or already claimed by this worker for inline running)."""
    graph = tr.graph
    node = graph.nodes[node_id]
    kind = get_kind(node.type)
    visits = tr.instance.state.setdefault("visits", {})
    visit = visits.get(node_id, 0) + 1
    visits[node_id] = visit
    # The last activations, in order: what a loop-breaker halt shows as the path that looped.
    trail = tr.instance.state.setdefault("trail", [])
    trail.append(node_id)
    del trail[:-TRAIL_LENGTH]
    inst = tr.instance
    step = StepRun(
        instance=inst, node_id=node_id, node_type=node.type, visit=visit, queue=queue_for(node, kind),
        idempotency_key=f"{inst.pk}:{node_id}:{visit}", trace_id=inst.trace_id, created_at=tr.now,
        due_at=tr.now,
    )
    if kind.structural:
        step.status = StepStatus.SUCCEEDED
        step.started_at = step.finished_at = tr.now
        step.attempt = 1
    elif park:
        step.status = StepStatus.PENDING
        step.due_at = None
    elif claim_for:
        step.status = StepStatus.RUNNING
        step.attempt = 1
        step.worker = claim_for
        step.lease_token = token
        step.started_at = step.heartbeat_at = tr.now
        step.lease_until = tr.now + timedelta(seconds=conf("LEASE_S"))
    step.save(force_insert=True)
    if kind.structural:
        tr.event("step_succeeded", node_id, step, visit=visit, structural=True)
    elif park:
        tr.event("step_pending", node_id, step, visit=visit)
    elif claim_for:
        tr.event("step_started", node_id, step, visit=visit, attempt=1, worker=claim_for, queue=step.queue)
    else:
        tr.event("step_queued", node_id, step, visit=visit, queue=step.queue)
        tr.enqueue.append((step.pk, step.queue))
    return step


# --- Starting -----------------------------------------------------------------------------------

def start_instance(version: WorkflowVersion, start_input: dict[str, Any] | None = None, *,
                   idempotency_key: str | None = None, user: Any = None,
                   now: datetime | None = None) -> WorkflowInstance:
    """Create an instance and run its start node, all in one transaction.

    A repeated idempotency key returns the instance the first request created.
    """
    start_input = dict(start_input or {})
    _check_payload("start input", start_input)
    if idempotency_key:
        existing = WorkflowInstance.objects.filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing
    try:
        return _create_instance(version, start_input, idempotency_key, user, now or timezone.now())
    except IntegrityError:
        # Two requests with one key raced past the lookup: the unique key let one commit.
        existing = WorkflowInstance.objects.filter(idempotency_key=idempotency_key).first() \
            if idempotency_key else None
        if existing is None:
            raise
        return existing


def _create_instance(version: WorkflowVersion, start_input: dict[str, Any], idempotency_key: str | None,
                     user: Any, now: datetime) -> WorkflowInstance:
    graph = graph_for_version(version.pk)
    ttl = graph.settings.ttl_s or conf("DEFAULT_TTL_S")
    budget = graph.settings.budget_usd
    with transaction.atomic():
        instance = WorkflowInstance.objects.create(
            version=version, status=InstanceStatus.RUNNING, input=start_input, context=dict(start_input),
            state={"visits": {}, "joins": {}, "budget_tokens": graph.settings.budget_tokens},
            max_transitions=graph.settings.max_transitions or conf("DEFAULT_MAX_TRANSITIONS"),
            deadline=now + timedelta(seconds=ttl),
            idempotency_key=idempotency_key or None, created_by=user if getattr(user, "pk", None) else None,
            created_at=now, updated_at=now,
            budget_usd=Decimal(str(budget)) if budget is not None else None,
        )
        tr = Transition(instance, graph, now)
        tr.event("instance_started", version=version.number, definition=version.definition.slug,
                 trace_id=instance.trace_id)
        start = graph.start_node
        tr.set_instance(loop_count=1, state=instance.state)
        step = _new_step(tr, start)
        StepRun.objects.filter(pk=step.pk).update(output=start_input)
        _resolve(tr, step, start_input, fired=edges_fired(graph, start, lambda e: _holds(tr, e, start_input)))
        tr.commit()
    log.info("instance started", extra={"instance": instance.pk, "trace_id": instance.trace_id})
    return instance


# --- Claiming -----------------------------------------------------------------------------------

@dataclass
class Claim:
    step: StepRun
    instance: WorkflowInstance
    graph: Graph
    node: Node
    kind: NodeKind
    token: str
    worker: str
    call: StepCall | None = None
    timings: dict[str, float] = field(default_factory=dict)


def claim_step(step_id: int, worker: str, now: datetime | None = None) -> Claim | None:
    """Take a queued step for this worker. None when someone else has it or it is no longer due."""
    now = now or timezone.now()
    token = secrets.token_hex(8)
    with transaction.atomic():
        # The conditional UPDATE is the claim: of two workers handed the same job, one wins.
        claimed = StepRun.objects.filter(pk=step_id, status=StepStatus.QUEUED).update(
            status=StepStatus.RUNNING, attempt=F("attempt") + 1, worker=worker, lease_token=token,
            started_at=now, heartbeat_at=now, lease_until=now + timedelta(seconds=conf("LEASE_S")),
        )
        if not claimed:
            return None
        step = StepRun.objects.get(pk=step_id)
        instance = _lock_instance(step.instance_id)
        graph = graph_for_version(instance.version_id)
        tr = Transition(instance, graph, now)
        if instance.status == InstanceStatus.HALTED:
            # A job that was already on its queue when the instance halted: park the step again
            # (the claim's attempt is given back) until an operator resumes the instance.
            StepRun.objects.filter(pk=step_id).update(status=StepStatus.PENDING, due_at=None, lease_token="",
                                                      lease_until=None, attempt=F("attempt") - 1)
            return None
        if not _may_run(instance, step.node_id):
            StepRun.objects.filter(pk=step_id).update(status=StepStatus.CANCELLED, finished_at=now)
            instance.open_steps -= 1
            tr.set_instance(open_steps=instance.open_steps)
            tr.event("step_cancelled", step.node_id, step, reason=f"instance is {instance.status}")
            tr.commit(checkpoint=False)
            return None
        if instance.deadline and now > instance.deadline:
            _expire(tr, now)
            tr.commit()
            return None
        tr.event("step_started", step.node_id, step, visit=step.visit, attempt=step.attempt, worker=worker,
                 queue=step.queue)
        tr.commit(checkpoint=False)
    node = node_for_step(graph, step.node_id)
    return Claim(step=step, instance=instance, graph=graph, node=node, kind=get_kind(node.type), token=token,
                 worker=worker)


def _may_run(instance: WorkflowInstance, node_id: str) -> bool:
    if node_id.startswith(COMPENSATE_PREFIX):
        return instance.status == InstanceStatus.COMPENSATING
    return instance.status in INSTANCE_ACTIVE


# --- Running ------------------------------------------------------------------------------------

class StepOutputs(Mapping[str, Any]):
    """`steps.<node>` in templates and conditions: the latest succeeded run of each node, read lazily."""

    def __init__(self, instance_id: int) -> None:
        self.instance_id = instance_id
        self._cache: dict[str, Any] = {}

    def __getitem__(self, node_id: str) -> Any:
        if node_id not in self._cache:
            row = (StepRun.objects.filter(instance_id=self.instance_id, node_id=node_id,
                                          status=StepStatus.SUCCEEDED)
                   .order_by("-visit").values("output", "visit").first())
            if row is None:
                raise KeyError(node_id)
            self._cache[node_id] = row
        return self._cache[node_id]

    def __iter__(self) -> Iterator[str]:
        return iter(StepRun.objects.filter(instance_id=self.instance_id, status=StepStatus.SUCCEEDED)
                    .values_list("node_id", flat=True).distinct())

    def __len__(self) -> int:
        return sum(1 for _ in self)


def build_call(claim: Claim, now: datetime | None = None) -> StepCall:
    """Render the node's config against the instance and make the handler's argument."""
    now = now or timezone.now()
    inst, node, kind = claim.instance, claim.node, claim.kind
    steps = StepOutputs(inst.pk)
    names = {"context": inst.context, "steps": steps, "input": inst.input}
    raw = node.config
    try:
        config = {key: (value if key in kind.raw_config_keys else expressions.render(value, names))
                  for key, value in raw.items()}
    except ExpressionError as exc:
        raise PermanentStepError(f"node '{node.id}': template failed: {exc}") from None
    call_index = 0
    if node.type == "llm" and raw.get("provider") == "scripted":
        earlier = (StepRun.objects.filter(instance_id=inst.pk, node_id=node.id, visit__lt=claim.step.visit)
                   .aggregate(total=Sum("attempt"))["total"]) or 0
        call_index = earlier + claim.step.attempt - 1
    gate = None
    if node.type == "llm":
        from workflows.breakers import DatabaseBreaker, provider_key

        gate = DatabaseBreaker(provider_key(config))
    call = StepCall(
        node=node, config=config, context=inst.context, steps=steps, start_input=inst.input,
        instance_id=inst.pk, visit=claim.step.visit, attempt=claim.step.attempt,
        idempotency_key=claim.step.idempotency_key, trace_id=inst.trace_id, now=now,
        activated_at=claim.step.created_at, engine=engine_config(), call_index=call_index, breaker=gate,
    )
    claim.call = call
    return call


@dataclass
class Outcome:
    result: NodeResult | None = None
    error: StepError | None = None


def _as_step_error(exc: BaseException) -> StepError:
    if isinstance(exc, StepError):
        return exc
    # An unexpected exception from a handler: transient, so the node's retry policy decides. Its
    # traceback (the end of it) is kept for the instance page's step inspector.
    trace = "".join(traceback.format_exception(exc))[-TRACEBACK_CHARS:]
    return StepError(f"{type(exc).__name__}: {exc}", details={"exception": type(exc).__name__, "traceback": trace})


def timeout_for(claim: Claim) -> float:
    return float(claim.node.timeout_s or conf("DEFAULT_STEP_TIMEOUT_S"))


def run_claimed(claim: Claim) -> Outcome:
    """Run a synchronous handler under its timeout, keeping its lease alive while it runs."""
    try:
        call = build_call(claim)
        timeout = timeout_for(claim)
        with Heartbeat(conf("LEASE_S") / 3, lambda: extend_lease(claim)), \
                time_limit(timeout, f"step {claim.node.id}"):
            result = claim.kind.run(call)
        return Outcome(result=result)
    except Exception as exc:  # noqa: BLE001 - a failing node must never take the worker down
        return Outcome(error=_as_step_error(exc))


def extend_lease(claim: Claim) -> None:
    now = timezone.now()
    StepRun.objects.filter(pk=claim.step.pk, status=StepStatus.RUNNING, lease_token=claim.token).update(
        lease_until=now + timedelta(seconds=conf("LEASE_S")), heartbeat_at=now)


def release_step(claim: Claim, reason: str, now: datetime | None = None) -> bool:
    """Give a claimed step back, queued again, without counting the attempt: its worker is stopping
    before the handler could finish (the ai consumer's shutdown). The caller puts the job back on
    its queue. False when the lease was no longer ours (then nothing changes)."""
    now = now or timezone.now()
    with transaction.atomic():
        instance = _lock_instance(claim.instance.pk)
        released = StepRun.objects.filter(pk=claim.step.pk, status=StepStatus.RUNNING,
                                          lease_token=claim.token).update(
            status=StepStatus.QUEUED, attempt=F("attempt") - 1, worker="", lease_token="", lease_until=None,
            due_at=now)
        if not released:
            return False
        tr = Transition(instance, claim.graph, now)
        tr.event("step_queued", claim.step.node_id, claim.step, visit=claim.step.visit, queue=claim.step.queue,
                 released_by=claim.worker, reason=reason)
        tr.commit(checkpoint=False)
    return True


# --- Finishing ----------------------------------------------------------------------------------

def _holds(tr: Transition, edge: Any, output: Any) -> bool:
    names = expressions.condition_names(output, tr.instance.context, StepOutputs(tr.instance.pk),
                                        tr.instance.input)
    return bool(expressions.evaluate(edge.when, names))


def _redacted_input(claim: Claim) -> dict[str, Any] | None:
    if claim.call is None:
        return None
    config = dict(claim.call.config)
    if isinstance(config.get("headers"), dict):
        config["headers"] = {
            k: ("***" if any(word in k.lower() for word in _SECRET_HEADER_WORDS) else v)
            for k, v in config["headers"].items()
        }
    return config


def finish_step(claim: Claim, outcome: Outcome, *, allow_inline: bool = False,
                now: datetime | None = None) -> Claim | None:
    """Commit a step's outcome and what follows from it. Returns the successor claimed for inline
    running by this worker, when there is exactly one on the same queue."""
    now = now or timezone.now()
    if outcome.error is None and outcome.result is not None and outcome.result.defer_until is None:
        try:
            _check_payload(f"output of step {claim.node.id}", outcome.result.output)
        except PayloadTooLarge as exc:
            outcome = Outcome(error=exc)
    with transaction.atomic():
        instance = _lock_instance(claim.instance.pk)
        tr = Transition(instance, claim.graph, now)
        step = StepRun.objects.filter(pk=claim.step.pk, status=StepStatus.RUNNING,
                                      lease_token=claim.token).first()
        if step is None:
            # Our lease was taken over (or the step was cancelled): the outcome must not commit.
            log.warning("step %s: lease lost, outcome discarded", claim.step.pk)
            return None
        if not _may_run(instance, step.node_id) and instance.status != InstanceStatus.HALTED:
            _close_step(tr, step, StepStatus.CANCELLED, reason=f"instance is {instance.status}")
            tr.commit(checkpoint=False)
            return None
        if outcome.error is not None and outcome.error.code == "circuit_open":
            _park_step(tr, step)
            _halt(tr, "circuit_open", {"message": outcome.error.message, "node": step.node_id,
                                       **outcome.error.details}, step=step)
            tr.commit()
            return None
        if outcome.error is not None:
            _fail_attempt(tr, step, claim, outcome.error)
            tr.commit()
            return None
        assert outcome.result is not None
        result = outcome.result
        if result.defer_until is not None:
            _defer(tr, step, result.defer_until)
            tr.commit(checkpoint=False)
            return None
        return _succeed(tr, step, claim, result, allow_inline)


def _succeed(tr: Transition, step: StepRun, claim: Claim, result: NodeResult, allow_inline: bool) -> Claim | None:
    inst = tr.instance
    if step.node_id.startswith(COMPENSATE_PREFIX):
        StepRun.objects.filter(pk=step.pk).update(status=StepStatus.SUCCEEDED, output=result.output,
                                                  finished_at=tr.now, input=_redacted_input(claim), error=None)
        tr.event("compensation_succeeded", step.node_id, step, visit=step.visit, attempt=step.attempt)
        _compensate_next(tr, done=step)
        tr.commit()
        return None
    if result.context_updates:
        new_context = {**inst.context, **result.context_updates}
        try:
            _check_payload("context", new_context)
        except PayloadTooLarge as exc:
            _fail_attempt(tr, step, claim, exc)
            tr.commit()
            return None
        tr.set_instance(context=new_context)
    try:
        fired = edges_fired(tr.graph, step.node_id, lambda e: _holds(tr, e, result.output))
    except ExpressionError as exc:
        _fail_attempt(tr, step, claim, PermanentStepError(f"edge condition failed: {exc}"))
        tr.commit()
        return None
    usage = result.usage
    StepRun.objects.filter(pk=step.pk).update(
        status=StepStatus.SUCCEEDED, output=result.output, usage=usage, finished_at=tr.now,
        input=_redacted_input(claim), error=None, degraded=result.degraded)
    if usage:
        tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        tr.set_instance(tokens=inst.tokens + tokens,
                        cost_usd=Decimal(inst.cost_usd) + Decimal(str(usage.get("cost_usd", 0))))
    tr.event("step_succeeded", step.node_id, step, visit=step.visit, attempt=step.attempt,
             duration_ms=round((tr.now - step.started_at).total_seconds() * 1000, 2) if step.started_at else None,
             usage=usage, degraded=result.degraded)
    tr.set_instance(open_steps=inst.open_steps - 1)
    hold = _budget_exceeded(inst) if usage else None
    inline = _resolve(tr, step, result.output, fired, inline_queue=step.queue if allow_inline else None,
                      worker=claim.worker, hold=hold)
    tr.commit()
    return inline


def _budget_exceeded(inst: WorkflowInstance) -> dict[str, Any] | None:
    """Past its cost or token budget, an instance halts before anything else starts."""
    if inst.budget_usd is not None and Decimal(inst.cost_usd) > Decimal(inst.budget_usd):
        return {"message": f"cost ${Decimal(inst.cost_usd):.6f} passed the budget of ${inst.budget_usd}",
                "cost_usd": float(inst.cost_usd), "budget_usd": float(inst.budget_usd), "tokens": inst.tokens}
    budget_tokens = inst.state.get("budget_tokens")
    if budget_tokens is not None and inst.tokens > budget_tokens:
        return {"message": f"{inst.tokens} tokens passed the budget of {budget_tokens}",
                "tokens": inst.tokens, "budget_tokens": budget_tokens, "cost_usd": float(inst.cost_usd)}
    return None


def _resolve(tr: Transition, step: StepRun, output: Any, fired: dict[int, bool],
             inline_queue: str | None = None, worker: str = "",
             hold: dict[str, Any] | None = None) -> Claim | None:
    """Apply the scheduling decision for a finished step: skips, activations, loop breaker, end.

    With `hold` (a budget overrun), the activations are kept for when an operator resumes."""
    inst = tr.instance
    graph = tr.graph
    state = inst.state
    decision = advance(graph, state.setdefault("joins", {}), step.node_id, fired)
    tr.set_instance(state=state)
    for node_id in decision.skipped:
        tr.event("node_skipped", node_id)
    if decision.fired_edges:
        tr.event("edges_taken", step.node_id, step, edges=decision.fired_edges)

    if inst.status == InstanceStatus.HALTED:
        # A step that was already running when the instance halted: its result stands, and what it
        # activates waits for the operator's decision with the rest.
        state.setdefault("resume", {}).setdefault("activate", []).extend(decision.activate)
        return None
    if hold is not None:
        _halt(tr, "budget_exceeded", {**hold, "node": step.node_id}, resume_activations=decision.activate)
        return None
    return _activate(tr, decision.activate, inline_queue=inline_queue, worker=worker, after=step.node_id)


def _activate(tr: Transition, activate: list[str], *, inline_queue: str | None = None, worker: str = "",
              after: str = "") -> Claim | None:
    """Start the given nodes (loop breaker first), then complete the instance if nothing is left."""
    inst = tr.instance
    graph = tr.graph
    state = inst.state
    check = count_activations(inst.loop_count, len(activate), inst.max_transitions)
    if not check.allowed:
        _halt(tr, "loop_breaker",
              {"message": f"more than {inst.max_transitions} node activations (max_transitions)",
               "max_transitions": inst.max_transitions, "next": activate,
               "path": list(state.get("trail", []))}, resume_activations=activate)
        return None
    tr.set_instance(loop_count=check.loop_count)

    inline: Claim | None = None
    candidates = [n for n in activate if not get_kind(graph.nodes[n].type).structural]
    for node_id in activate:
        node = graph.nodes[node_id]
        kind = get_kind(node.type)
        if kind.structural:
            _new_step(tr, node_id)
            if node.type == "end":
                state["ended"] = node_id
            continue
        if kind.awaits_person:
            _open_human_task(tr, node)
            continue
        claim_inline = (inline_queue is not None and len(candidates) == 1 and not kind.is_async
                        and queue_for(node, kind) == inline_queue)
        token = secrets.token_hex(8) if claim_inline else ""
        new = _new_step(tr, node_id, claim_for=worker if claim_inline else None, token=token)
        tr.set_instance(open_steps=inst.open_steps + 1)
        if claim_inline:
            inline = Claim(step=new, instance=inst, graph=graph, node=node, kind=kind, token=token, worker=worker)
    tr.set_instance(state=state)

    if inst.open_steps == 0:
        if state.get("ended"):
            _finish_instance(tr, InstanceStatus.COMPLETED, "", None)
        else:
            _fail_for_good(tr, "dead_end", {
                "message": f"node '{after}' finished and no path leads on: none of its outgoing "
                           "conditions held and no other step is running", "node": after})
    return inline


def _open_human_task(tr: Transition, node: Node) -> None:
    """A human node: its step waits (pending, no due time) for an answer in the review queue."""
    from workflows.models import ReviewItem

    step = _new_step(tr, node.id, park=True)
    tr.set_instance(open_steps=tr.instance.open_steps + 1)
    names = {"context": tr.instance.context, "steps": StepOutputs(tr.instance.pk), "input": tr.instance.input}
    try:
        prompt = expressions.render(node.config.get("prompt", ""), names)
    except ExpressionError as exc:
        prompt = f"{node.config.get('prompt', '')} (template failed: {exc})"
    item = ReviewItem.objects.create(
        instance=tr.instance, step=step, node_id=node.id, reason="human_task",
        assignee_group=node.config.get("assignee_group", "operators"), created_at=tr.now,
        details={"prompt": prompt, "inputs": node.config.get("inputs") or {}})
    if tr.instance.status == InstanceStatus.RUNNING:
        tr.set_instance(status=InstanceStatus.WAITING)
    tr.event("human_task_opened", node.id, step, review=item.pk, prompt=prompt)


def _fail_attempt(tr: Transition, step: StepRun, claim: Claim, error: StepError) -> None:
    policy = RetryPolicy.from_node(claim.node.retry, conf("DEFAULT_MAX_ATTEMPTS"))
    info = error.as_dict()
    lost_worker = info.get("code") == "lease_expired"
    if lost_worker:
        # A dead worker is not the step's fault: retry it even past the node's attempts, until it has
        # lost POISON_AFTER_LOSSES workers (then it is presumed to be what kills them).
        policy = replace(policy, max_attempts=max(policy.max_attempts, conf("POISON_AFTER_LOSSES")))
    if policy.should_retry(step.attempt, error.permanent):
        delay = policy.delay(step.attempt)
        due = tr.now + timedelta(seconds=delay)
        StepRun.objects.filter(pk=step.pk).update(status=StepStatus.RETRYING, error=info, due_at=due,
                                                  lease_token="", lease_until=None,
                                                  input=_redacted_input(claim))
        tr.event("step_retrying", step.node_id, step, visit=step.visit, attempt=step.attempt, error=info,
                 retry_in_s=round(delay, 3))
        return
    if lost_worker and tr.instance.status != InstanceStatus.HALTED:
        # A step whose worker died on every attempt (a poison step) would kill workers forever:
        # park it and ask an operator, who may retry it, reroute or reject.
        StepRun.objects.filter(pk=step.pk).update(error=info)
        _park_step(tr, step)
        # The error's own fields first: its "message" must not replace the one naming the step.
        _halt(tr, "poison_step", {**info, "message": f"step '{step.node_id}' lost its worker on all "
                                  f"{step.attempt} attempt(s)", "node": step.node_id, "attempts": step.attempt},
              step=step)
        return
    if step.node_id.startswith(COMPENSATE_PREFIX):
        # A compensation that keeps failing needs a person: park it, halt, and let an operator retry
        # it or give up (reject).
        StepRun.objects.filter(pk=step.pk).update(error=info, input=_redacted_input(claim))
        _park_step(tr, step)
        _halt(tr, "compensation_failed", {**info, "message": f"compensation {step.node_id} failed: "
                                          f"{error.message}", "node": step.node_id}, step=step)
        return
    StepRun.objects.filter(pk=step.pk).update(status=StepStatus.FAILED, error=info, finished_at=tr.now,
                                              lease_token="", lease_until=None, input=_redacted_input(claim))
    tr.event("step_failed", step.node_id, step, visit=step.visit, attempt=step.attempt, error=info)
    tr.set_instance(open_steps=tr.instance.open_steps - 1)
    _fail_for_good(tr, "step_failed",
                   {**info, "message": f"step '{step.node_id}' failed: {error.message}", "node": step.node_id})


def _defer(tr: Transition, step: StepRun, until: datetime) -> None:
    # Not an attempt: the step sleeps until due, then runs again (timers).
    StepRun.objects.filter(pk=step.pk).update(status=StepStatus.PENDING, due_at=until, attempt=F("attempt") - 1,
                                              lease_token="", lease_until=None)
    tr.event("step_waiting", step.node_id, step, until=until.isoformat())


def _close_step(tr: Transition, step: StepRun, status: str, reason: str) -> None:
    StepRun.objects.filter(pk=step.pk).update(status=status, finished_at=tr.now, lease_token="", lease_until=None)
    tr.set_instance(open_steps=tr.instance.open_steps - 1)
    tr.event(f"step_{status}", step.node_id, step, reason=reason)


def _cancel_open_steps(tr: Transition, reason: str) -> None:
    open_steps = list(StepRun.objects.filter(instance=tr.instance, status__in=STEP_OPEN))
    StepRun.objects.filter(pk__in=[s.pk for s in open_steps]).update(
        status=StepStatus.CANCELLED, finished_at=tr.now, lease_token="", lease_until=None)
    for step in open_steps:
        tr.event("step_cancelled", step.node_id, step, reason=reason)
    tr.set_instance(open_steps=0)


def _finish_instance(tr: Transition, status: str, reason: str, error: dict[str, Any] | None) -> None:
    from workflows.models import ReviewItem

    tr.set_instance(status=status, halt_reason=reason, error=error, finished_at=tr.now)
    tr.event(f"instance_{status}", reason=reason, error=error)
    # Nothing is left to decide on an instance that ended.
    ReviewItem.objects.filter(instance=tr.instance, status="open").update(status="closed", decided_at=tr.now)


def _park_step(tr: Transition, step: StepRun) -> None:
    StepRun.objects.filter(pk=step.pk).update(status=StepStatus.PENDING, due_at=None, lease_token="",
                                              lease_until=None)
    tr.event("step_parked", step.node_id, step, visit=step.visit)


def _halt(tr: Transition, reason: str, details: dict[str, Any], *, resume_activations: list[str] | None = None,
          step: StepRun | None = None, abandon_running: bool = False) -> None:
    """Halt into the review queue. Completed steps and context stay; queued work is parked.

    Running steps finish and commit (their successors wait with the rest), unless `abandon_running`
    (TTL): then their leases are revoked and whatever they return is discarded.
    """
    from workflows.models import ReviewItem

    inst = tr.instance
    parkable = [StepStatus.QUEUED, StepStatus.RETRYING] + ([StepStatus.RUNNING] if abandon_running else [])
    parked = list(StepRun.objects.filter(instance=inst, status__in=parkable).values_list("pk", "node_id"))
    if parked:
        StepRun.objects.filter(pk__in=[pk for pk, _ in parked]).update(
            status=StepStatus.PENDING, due_at=None, lease_token="", lease_until=None)
    state = inst.state
    resume = state.setdefault("resume", {})
    resume.setdefault("activate", []).extend(resume_activations or [])
    tr.set_instance(status=InstanceStatus.HALTED, halt_reason=reason, error=details, state=state)
    item = ReviewItem.objects.create(instance=inst, step=step, node_id=str(details.get("node", "")),
                                     reason=reason, details=details, created_at=tr.now)
    tr.event("instance_halted", reason=reason, review=item.pk, details=details,
             parked=[node_id for _, node_id in parked])


def resume(tr: Transition, *, goto: str | None = None, note: str = "") -> None:
    """Carry on after a halt: unpark parked steps and start what was held back, or (with `goto`)
    drop both and start the chosen node instead. Runs under the instance lock."""
    inst = tr.instance
    state = inst.state
    held = list(state.pop("resume", {}).get("activate", []))
    parked = list(StepRun.objects.filter(instance=inst, status=StepStatus.PENDING, due_at__isnull=True)
                  .exclude(node_type__in=_PERSON_KINDS()))
    if goto is not None:
        StepRun.objects.filter(pk__in=[s.pk for s in parked]).update(status=StepStatus.CANCELLED,
                                                                       finished_at=tr.now)
        for step in parked:
            tr.event("step_cancelled", step.node_id, step, reason=f"rerouted to {goto}")
        tr.set_instance(open_steps=inst.open_steps - len(parked))
        state["joins"] = {}
        held = [goto]
    else:
        StepRun.objects.filter(pk__in=[s.pk for s in parked]).update(status=StepStatus.QUEUED, due_at=tr.now)
        for step in parked:
            tr.event("step_queued", step.node_id, step, visit=step.visit, queue=step.queue, resumed=True)
            tr.enqueue.append((step.pk, step.queue))
    if state.get("compensation", {}).get("active"):
        # Halted during compensation (compensation_failed): carry on compensating.
        tr.set_instance(status=InstanceStatus.COMPENSATING, halt_reason="", error=None, state=state)
        tr.event("instance_resumed", compensation=True, unparked=[s.node_id for s in parked], note=note)
        return
    waiting = StepRun.objects.filter(instance=inst, status=StepStatus.PENDING,
                                     node_type__in=_PERSON_KINDS()).exists()
    status = InstanceStatus.WAITING if waiting else InstanceStatus.RUNNING
    tr.set_instance(status=status, halt_reason="", error=None, state=state)
    if inst.deadline and inst.deadline <= tr.now:
        ttl = tr.graph.settings.ttl_s or conf("DEFAULT_TTL_S")
        tr.set_instance(deadline=tr.now + timedelta(seconds=ttl))
    tr.event("instance_resumed", goto=goto, activate=held, unparked=[s.node_id for s in parked] if not goto else [],
             note=note)
    _activate(tr, held, after=goto or "")


def _PERSON_KINDS() -> list[str]:
    from workflows.engine.nodes import known_kinds

    return [name for name, kind in known_kinds().items() if kind.awaits_person]


def _stop_instance(tr: Transition, status: str, reason: str, error: dict[str, Any]) -> None:
    """Stop an instance early (failure, loop breaker, TTL): open steps are cancelled, state kept."""
    _cancel_open_steps(tr, reason)
    _finish_instance(tr, status, reason, error)


def _fail_for_good(tr: Transition, reason: str, error: dict[str, Any]) -> None:
    _stop_instance(tr, InstanceStatus.FAILED, reason, error)
    start_compensation(tr)


def start_compensation(tr: Transition) -> bool:
    """Saga: undo the completed steps that declare `compensate`, newest first, one at a time.

    Returns False (the instance stays failed) when there is nothing to compensate."""
    inst = tr.instance
    done = (StepRun.objects.filter(instance=inst, status=StepStatus.SUCCEEDED)
            .exclude(node_id__startswith=COMPENSATE_PREFIX).order_by("-finished_at", "-id")
            .values_list("pk", "node_id"))
    todo = [pk for pk, node_id in done if node_id in tr.graph.nodes and tr.graph.nodes[node_id].compensate]
    if not todo:
        return False
    state = inst.state
    state["compensation"] = {"active": True, "todo": todo}
    tr.set_instance(status=InstanceStatus.COMPENSATING, state=state)
    tr.event("compensation_started", steps=todo)
    _compensate_next(tr)
    return True


def _compensate_next(tr: Transition, done: StepRun | None = None) -> None:
    inst = tr.instance
    state = inst.state
    comp = state.setdefault("compensation", {"active": True, "todo": []})
    if done is not None:
        original_id = comp.get("current")
        StepRun.objects.filter(pk=original_id).update(status=StepStatus.COMPENSATED)
        tr.event("step_compensated", done.node_id[len(COMPENSATE_PREFIX):], None, step_id=original_id)
    if not comp["todo"]:
        comp["active"] = False
        comp.pop("current", None)
        tr.set_instance(state=state, status=InstanceStatus.COMPENSATED, finished_at=tr.now)
        tr.event("instance_compensated")
        return
    original = StepRun.objects.get(pk=comp["todo"].pop(0))
    comp["current"] = original.pk
    node = compensation_node(tr.graph.nodes[original.node_id])
    assert node is not None
    kind = get_kind(node.type)
    step = StepRun.objects.create(
        instance=inst, node_id=node.id, node_type=node.type, visit=original.visit, queue=queue_for(node, kind),
        idempotency_key=f"{inst.pk}:{node.id}:{original.visit}", trace_id=inst.trace_id, created_at=tr.now,
        due_at=tr.now, status=StepStatus.QUEUED)
    tr.set_instance(state=state)
    tr.event("step_queued", node.id, step, visit=step.visit, queue=step.queue, compensates=original.node_id)
    tr.enqueue.append((step.pk, step.queue))


def _expire(tr: Transition, now: datetime) -> None:
    inst = tr.instance
    details = {"message": f"the instance passed its deadline {inst.deadline.isoformat() if inst.deadline else ''}",
               "deadline": inst.deadline.isoformat() if inst.deadline else None}
    if conf("TTL_ACTION") == "fail":
        _fail_for_good(tr, "ttl_expired", details)
    else:
        # Its running step is abandoned: nothing waits forever on a step past the deadline.
        _halt(tr, "ttl_expired", details, abandon_running=True)


def expire_instance(instance_id: int, now: datetime | None = None) -> bool:
    """TTL: stop an instance past its deadline. False when it was already final or not yet due."""
    now = now or timezone.now()
    with transaction.atomic():
        inst = _lock_instance(instance_id)
        if inst.status not in INSTANCE_ACTIVE or not inst.deadline or inst.deadline >= now:
            return False
        tr = Transition(inst, graph_for_version(inst.version_id), now)
        _expire(tr, now)
        tr.commit()
    return True


def cancel_instance(instance_id: int, reason: str = "cancelled by request", now: datetime | None = None) -> bool:
    now = now or timezone.now()
    with transaction.atomic():
        inst = _lock_instance(instance_id)
        if inst.status not in INSTANCE_ACTIVE and inst.status != InstanceStatus.HALTED:
            return False
        tr = Transition(inst, graph_for_version(inst.version_id), now)
        _stop_instance(tr, InstanceStatus.CANCELLED, "cancelled", {"message": reason})
        tr.commit()
    return True


# --- Jobs ---------------------------------------------------------------------------------------

def run_step(step_id: int, worker: str, queue: str | None = None) -> int:
    """What a worker does with one job: claim, run, commit, and carry on inline while a single
    same-queue successor follows (each step still committed on its own). Returns steps run."""
    claim = claim_step(step_id, worker)
    ran = 0
    inline_allowed = conf("INLINE_CONTINUATION")
    while claim is not None:
        outcome = run_claimed(claim)
        ran += 1
        claim = finish_step_reconnecting(claim, outcome, allow_inline=inline_allowed)
    return ran


def finish_step_reconnecting(claim: Claim, outcome: Outcome, *, allow_inline: bool = False) -> Claim | None:
    """finish_step, tried again on a fresh connection while the lease holds when the database
    connection drops (a failover, a killed backend): the handler's work is not thrown away and run
    twice. Safe because of the lease token: if an earlier try did commit (its acknowledgement was
    lost), the next finds the step no longer ours and commits nothing."""
    import time

    from django.db import InterfaceError, OperationalError, connection

    deadline = time.monotonic() + conf("LEASE_S") / 2
    delay = 0.1
    failed = False
    while True:
        try:
            successor = finish_step(claim, outcome, allow_inline=allow_inline)
            if successor is None and failed and allow_inline:
                return _adopt_inline_successor(claim)
            return successor
        except (OperationalError, InterfaceError) as exc:
            if time.monotonic() + delay > deadline:
                raise
            failed = True
            log.warning("step %s: committing its outcome failed (%s); retrying on a new connection",
                        claim.step.pk, exc)
            connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _adopt_inline_successor(claim: Claim) -> Claim | None:
    """A commit whose acknowledgement was lost may have landed, claiming a successor for this worker
    to run inline. Carry on with it rather than leave it running for nobody until its lease expires."""
    done = StepRun.objects.filter(pk=claim.step.pk, status=StepStatus.SUCCEEDED, lease_token=claim.token).first()
    if done is None or done.finished_at is None:
        return None
    # The successor was created in the same transaction: started (claimed) at the step's finish time.
    successor = (StepRun.objects.filter(instance_id=done.instance_id, status=StepStatus.RUNNING,
                                        worker=claim.worker, started_at=done.finished_at)
                 .exclude(pk=done.pk).first())
    if successor is None:
        return None
    log.warning("step %s: its outcome had committed; carrying on with step %s", done.pk, successor.pk)
    node = node_for_step(claim.graph, successor.node_id)
    return Claim(step=successor, instance=WorkflowInstance.objects.get(pk=done.instance_id), graph=claim.graph,
                 node=node, kind=get_kind(node.type), token=successor.lease_token, worker=claim.worker)
