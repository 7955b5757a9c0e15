"""An in-process driver for the runtime: start, claim, run, finish (following inline claims) with
dispatch and live publishing captured instead of going to Redis, on a clock that moves only when
the driver says so. Also the normalised snapshot of an instance's rows that the equivalence tests
compare between stores."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from workflows import runtime
from workflows.models import Checkpoint, Event, ReviewItem, StateDelta, StepRun, WorkflowInstance, WorkflowVersion
from workflows.operators import review
from workflows.runtime import Claim, Outcome

# Microseconds, so that timestamps written as text (SQLite) are compared with them.
START = datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


@dataclass
class Clock:
    """timezone.now() for the whole process while a test runs (see conftest): moves only on tick()."""

    now: datetime = START

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: float = 1.0) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def reset(self) -> None:
        self.now = START


@dataclass
class Captured:
    """What the runtime handed to dispatch.enqueue_steps and live.publish_commit."""

    queue: list[tuple[int, str]] = field(default_factory=list)  # not yet taken by the driver
    dispatched: list[tuple[int, str]] = field(default_factory=list)  # every job, in order
    announced: list[tuple[int, int, int]] = field(default_factory=list)  # (instance, first seq, last seq)

    def enqueue_steps(self, items: list[tuple[int, str]], **options: Any) -> int:
        self.queue += items
        self.dispatched += items
        return len(items)

    def publish_commit(self, instance_id: int, first_seq: int, last_seq: int) -> None:
        self.announced.append((instance_id, first_seq, last_seq))

    def reset(self) -> None:
        self.queue.clear()
        self.dispatched.clear()
        self.announced.clear()


class Driver:
    """Does what workers and operators do, one step at a time, in this process."""

    def __init__(self, clock: Clock, captured: Captured, operator: Any,
                 committing: Callable[[], AbstractContextManager[Any]]) -> None:
        self.clock = clock
        self.captured = captured
        self.operator = operator
        # Runs the on_commit effects of what it wraps (needed under the `db` fixture, where the test's
        # transaction never commits; a no-op difference under `transactional_db`).
        self.committing = committing

    # --- Workers ----------------------------------------------------------------------------------

    def start(self, version: WorkflowVersion, data: dict[str, Any] | None = None) -> WorkflowInstance:
        self.clock.tick()
        with self.committing():
            return runtime.start_instance(version, data or {})

    def claim(self, step_id: int, worker: str = "w") -> Claim | None:
        self.clock.tick()
        with self.committing():
            return runtime.claim_step(step_id, worker)

    def run(self, claim: Claim) -> Outcome:
        self.clock.tick()
        with self.committing():  # a subworkflow step's handler commits its child's start
            return runtime.run_claimed(claim)

    def finish(self, claim: Claim, outcome: Outcome, allow_inline: bool = True) -> Claim | None:
        self.clock.tick()
        with self.committing():
            return runtime.finish_step(claim, outcome, allow_inline=allow_inline)

    def carry_on(self, claim: Claim | None) -> int:
        """Run a claimed step and the inline successors its commits hand back, as run_step does."""
        ran = 0
        while claim is not None:
            claim = self.finish(claim, self.run(claim))
            ran += 1
        return ran

    def run_job(self, step_id: int, worker: str = "w") -> int:
        return self.carry_on(self.claim(step_id, worker))

    def take(self, node_id: str | None = None) -> int:
        """The next queued job (the first for `node_id`, when given), off the captured queue."""
        for index, (step_id, _queue) in enumerate(self.captured.queue):
            if node_id is None or StepRun.objects.get(pk=step_id).node_id == node_id:
                del self.captured.queue[index]
                return step_id
        raise AssertionError(f"no queued job for {node_id or 'any node'}: {self.captured.queue}")

    def drain(self, limit: int = 200) -> int:
        """Run jobs until nothing is queued. Returns how many steps ran."""
        ran = 0
        while self.captured.queue:
            ran += self.run_job(self.take())
            assert ran < limit, "the driver ran away"
        return ran

    # --- The scheduler ----------------------------------------------------------------------------

    def promote(self, after_s: float) -> int:
        from workflows.scheduler import reconciler

        now = self.clock.tick(after_s)
        with self.committing():
            return reconciler.promote_due(now)

    def reclaim(self, after_s: float) -> int:
        from workflows.scheduler import reconciler

        now = self.clock.tick(after_s)
        with self.committing():
            return reconciler.reclaim_expired_leases(now)

    # --- Operators --------------------------------------------------------------------------------

    def decide(self, instance: WorkflowInstance, reason: str, action: str = "approve", **fields: Any) -> ReviewItem:
        item = ReviewItem.objects.get(instance=instance, reason=reason, status="open")
        self.clock.tick()
        with self.committing():
            return review.decide(item.pk, self.operator, review.Decision(action=action, **fields))

    def cancel(self, instance: WorkflowInstance) -> bool:
        self.clock.tick()
        with self.committing():
            return runtime.cancel_instance(instance.pk, "stop", now=self.clock.now)

    def expire(self, instance: WorkflowInstance, after_s: float) -> bool:
        now = self.clock.tick(after_s)
        with self.committing():
            return runtime.expire_instance(instance.pk, now)

    def release(self, claim: Claim, reason: str = "worker stopping") -> bool:
        self.clock.tick()
        with self.committing():
            return runtime.release_step(claim, reason)


def steps_of(instance_id: int, node_id: str | None = None) -> list[StepRun]:
    rows = StepRun.objects.filter(instance_id=instance_id).order_by("id")
    return list(rows.filter(node_id=node_id) if node_id else rows)


def fresh_run(clock: Clock, captured: Captured) -> None:
    """Every run of a scenario starts alike: same time, nothing captured, same counters and jitter."""
    from tests.store import functions

    clock.reset()
    captured.reset()
    functions.reset()
    random.seed(1)


# --- Snapshots ------------------------------------------------------------------------------------

VOLATILE_KEYS = frozenset({"traceback", "trace_id"})


def _clean(value: Any) -> Any:
    """JSON as stored, without the keys that differ between two runs whatever the store."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def snapshot(instance_id: int, captured: Captured | None = None) -> dict[str, Any]:
    """The instance's rows with ids replaced by what they stand for: a step by (node, visit), a review
    item by its place in the instance's items, the instance id by "I"."""
    inst = WorkflowInstance.objects.get(pk=instance_id)
    steps = list(StepRun.objects.filter(instance_id=instance_id).order_by("id"))
    label = {s.pk: f"{s.node_id}#{s.visit}" for s in steps}
    items = list(ReviewItem.objects.filter(instance_id=instance_id).order_by("id"))
    item_label = {item.pk: f"review#{n}" for n, item in enumerate(items, 1)}
    pk = str(instance_id)

    def ids(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: ids(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [ids(v, key) for v in value]
        if key in ("steps", "todo", "current", "step_id", "step") and isinstance(value, int):
            return label.get(value, value)
        if key == "review" and isinstance(value, int):
            return item_label.get(value, value)
        if key == "child" and isinstance(value, int):
            return "child"  # a sub-workflow's child instance (another id on each run)
        if key in ("instance",) and value == instance_id:
            return "I"
        if isinstance(value, str) and value.startswith(f"{pk}:"):
            return "I" + value[len(pk):]  # idempotency keys
        return value

    def norm(value: Any) -> Any:
        return ids(_clean(value))

    step_rows = [{
        "step": label[s.pk], "node_type": s.node_type, "attempt": s.attempt, "status": s.status, "queue": s.queue,
        "input": norm(s.input), "output": norm(s.output), "error": norm(s.error), "usage": norm(s.usage),
        "worker": s.worker, "leased": bool(s.lease_token), "lease_until": s.lease_until, "due_at": s.due_at,
        "key": norm(s.idempotency_key), "created_at": s.created_at, "started_at": s.started_at,
        "finished_at": s.finished_at, "heartbeat_at": s.heartbeat_at, "degraded": s.degraded,
    } for s in steps]
    events = [{
        "seq": e.seq, "type": e.type, "node": e.node_id, "step": label.get(e.step_id) if e.step_id else None,
        "payload": norm(e.payload), "at": e.created_at,
    } for e in Event.objects.filter(instance_id=instance_id).order_by("seq")]
    checkpoints = []
    for c in Checkpoint.objects.filter(instance_id=instance_id).order_by("seq", "id"):
        assert c.verifies(), f"checkpoint {c.seq} of instance {instance_id} does not verify"
        checkpoints.append({"seq": c.seq, "state": norm(c.state), "at": c.created_at})
    deltas = []
    for d in StateDelta.objects.filter(instance_id=instance_id).order_by("seq", "id"):
        assert d.verifies(), f"state delta {d.seq} of instance {instance_id} does not verify"
        deltas.append({"seq": d.seq, "delta": norm(d.delta), "at": d.created_at})
    reviews = [{
        "node": item.node_id, "reason": item.reason, "status": item.status, "details": norm(item.details),
        "step": label.get(item.step_id) if item.step_id else None, "decision": item.decision,
        "created_at": item.created_at, "decided_at": item.decided_at,
    } for item in items]
    instance = {
        "status": inst.status, "input": inst.input, "context": norm(inst.context), "state": norm(inst.state),
        "loop_count": inst.loop_count, "max_transitions": inst.max_transitions, "deadline": inst.deadline,
        "open_steps": inst.open_steps, "event_seq": inst.event_seq, "halt_reason": inst.halt_reason,
        "error": norm(inst.error), "tokens": inst.tokens, "cost_usd": Decimal(inst.cost_usd),
        "budget_usd": inst.budget_usd, "updated_at": inst.updated_at, "finished_at": inst.finished_at,
        "idempotency_key": inst.idempotency_key, "context_seq": inst.context_seq,
        "snapshot_seq": inst.snapshot_seq, "snapshot_bytes": inst.snapshot_bytes, "delta_bytes": inst.delta_bytes,
        "context_bytes": inst.context_bytes,
        # Written by each store on start; the key is unique per definition.
        "definition_is_the_version's": inst.definition_id == inst.version.definition_id,
    }
    shot: dict[str, Any] = {"instance": instance, "steps": step_rows, "events": events,
                            "checkpoints": checkpoints, "deltas": deltas, "reviews": reviews}
    if captured is not None:
        shot["jobs"] = [(label.get(step_id, step_id), queue) for step_id, queue in captured.dispatched
                        if step_id in label]
        # The live view is told each commit's range of event seqs (it reads the events from the log).
        shot["announced"] = [(first, last) for instance, first, last in captured.announced if instance == instance_id]
    return shot


def differences(left: dict[str, Any], right: dict[str, Any], path: str = "") -> Iterator[str]:
    """Where two snapshots differ, as readable lines (an assertion on == alone hides them in a wall)."""
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right), key=str):
            if key not in left or key not in right:
                yield f"{path}.{key}: only in {'orm' if key in left else 'sql'}"
            else:
                yield from differences(left[key], right[key], f"{path}.{key}")
    elif isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            yield from differences(a, b, f"{path}[{index}]")
    elif left != right or type(left) is not type(right) and not (
            isinstance(left, (int, Decimal)) and isinstance(right, (int, Decimal))):
        yield f"{path}: orm {left!r} != sql {right!r}"
