"""The reference store: every read and write of instance, step, event and checkpoint rows through
the Django ORM. The SQL stores (sql.py) override the hot path with hand-written statements and must
write exactly the rows this one writes (tests/store/ compares them).

A store writes units of work (store/unit.py) and nothing else follows from it: the post-commit
effects (jobs, live notices, notifications, sub-workflows) are the runtime's (runtime/effects.py),
run for the units a store says it wrote. Its own after-commit is its context cache (context_cache.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import Sum

from workflows.engine import deltas
from workflows.engine.statuses import StepStatus
from workflows.models import Checkpoint, Event, ReviewItem, StateDelta, StepRun, WorkflowInstance, canonical_json
from workflows.store import context_cache, snapshot_refs
from workflows.store.unit import UnitOfWork


class StaleWrite(Exception):
    """A conditional step UPDATE matched no row: the step moved on since the runtime read it. The
    transaction is rolled back; the runtime treats it as a lost lease or a lost race."""


STALE_RETRIES = 3
# decide(instance, ids of the steps whose leases held) -> (the unit of work, what to return)
Decide = Callable[[WorkflowInstance, set[int]], tuple[UnitOfWork, Any]]


SPENT = "_steadyflow_decided_unwritten"


def mark_spent(instance: WorkflowInstance) -> None:
    """A decision was made on this in-memory instance and not written: it no longer matches the
    database, so no later decision may start from it (claims of one round share the object)."""
    instance.__dict__[SPENT] = True


def is_spent(instance: WorkflowInstance) -> bool:
    return bool(instance.__dict__.get(SPENT))


class Finished(NamedTuple):
    """What `finish` did: the steps whose leases held (none: nothing was written), what `decide`
    returned, and the unit it wrote (the runtime runs its effects: runtime/effects.py)."""

    held: set[int]
    result: Any
    unit: UnitOfWork | None


@dataclass
class FinishRequest:
    """The outcomes of one instance's steps, for `finish`: the steps' leases, how to decide, and the
    instance as this worker last committed it (None when it does not hold it)."""

    instance_id: int
    leases: list[tuple[int, str]]
    decide: Decide
    fresh: WorkflowInstance | None = None


class OrmStore:
    """All SQL goes through the ORM; every method runs inside the caller's transaction when there is one."""

    name = "orm"

    # --- Transactions -------------------------------------------------------------------------

    def atomic(self) -> AbstractContextManager[Any]:
        manager: AbstractContextManager[Any] = transaction.atomic()
        return manager

    def on_commit(self, effect: Callable[[], object]) -> None:
        transaction.on_commit(effect)

    # --- Instances ------------------------------------------------------------------------------

    def create_instances(self, instances: list[WorkflowInstance]) -> list[WorkflowInstance]:
        """Insert new instances in one statement (their ids come back with them)."""
        created: list[WorkflowInstance] = WorkflowInstance.objects.bulk_create(instances)
        return created

    def instances_by_keys(self, definition_id: int, keys: list[str]) -> dict[str, WorkflowInstance]:
        """The instances of one definition started with these idempotency keys, by key (a key is
        unique per definition: the same key on another workflow is not this workflow's)."""
        if not keys:
            return {}
        return {instance.idempotency_key: instance for instance in
                WorkflowInstance.objects.filter(definition_id=definition_id, idempotency_key__in=keys)}

    def lock_instance(self, instance_id: int) -> WorkflowInstance:
        # The row lock serialises every transition of one instance: joins, loop counter, event seq.
        instance: WorkflowInstance = WorkflowInstance.objects.select_for_update().get(pk=instance_id)
        return instance

    def lock_for_finish(self, instance_id: int, step_id: int, token: str) -> tuple[WorkflowInstance, bool]:
        """Lock the instance and tell whether the step is still running under this lease token."""
        instance = self.lock_instance(instance_id)
        held = StepRun.objects.filter(pk=step_id, status=StepStatus.RUNNING, lease_token=token).exists()
        return instance, held

    # --- Claims and leases ------------------------------------------------------------------------

    def claim_started(self, step_id: int, worker: str, token: str, now: datetime,
                      lease_until: datetime) -> tuple[StepRun, WorkflowInstance] | None:
        """The common claim in one statement: a queued step of an active instance, claimed and its
        step_started event written, committed. None sends the runtime down the general path (which
        handles halted, cancelled and expired instances). The reference store always says None."""
        return None

    def claim_batch(self, step_ids: list[int], worker: str, token: str, now: datetime,
                    lease_until: datetime) -> list[tuple[WorkflowInstance, list[StepRun]]]:
        """claim_started for several queued steps (of one instance or many) in one statement: each
        instance with its steps claimed. The steps not claimed so take the general path one by one
        (the reference store claims none this way)."""
        return []

    def claim_queued(self, step_id: int, worker: str, token: str, now: datetime,
                     lease_until: datetime) -> StepRun | None:
        """1. Take a queued step: queued -> running with a fresh lease, one attempt more.
        The conditional UPDATE is the claim: of two workers handed the same job, one wins."""
        from django.db.models import F

        claimed = StepRun.objects.filter(pk=step_id, status=StepStatus.QUEUED).update(
            status=StepStatus.RUNNING, attempt=F("attempt") + 1, worker=worker, lease_token=token,
            started_at=now, heartbeat_at=now, lease_until=lease_until)
        if not claimed:
            return None
        step: StepRun = StepRun.objects.get(pk=step_id)
        return step

    def extend_leases(self, leases: Iterable[tuple[int, str]], now: datetime, until: datetime) -> int:
        """2. Push the leases of running steps still held under these tokens to `until`, in one transaction."""
        extended = 0
        with transaction.atomic():
            for step_id, token in leases:
                extended += StepRun.objects.filter(pk=step_id, status=StepStatus.RUNNING, lease_token=token).update(
                    lease_until=until, heartbeat_at=now)
        return extended

    # --- Reads --------------------------------------------------------------------------------

    def get_step(self, step_id: int) -> StepRun:
        step: StepRun = StepRun.objects.get(pk=step_id)
        return step

    def steps_of(self, instance_id: int, statuses: Iterable[str], *, node_types: Iterable[str] | None = None,
                 exclude_types: Iterable[str] | None = None, parked_only: bool = False) -> list[StepRun]:
        rows = StepRun.objects.filter(instance_id=instance_id, status__in=list(statuses))
        if node_types is not None:
            rows = rows.filter(node_type__in=list(node_types))
        if exclude_types is not None:
            rows = rows.exclude(node_type__in=list(exclude_types))
        if parked_only:
            rows = rows.filter(due_at__isnull=True)
        return list(rows.order_by("id"))

    def latest_output(self, instance_id: int, node_id: str) -> dict[str, Any] | None:
        """`steps.<node>`: the latest succeeded run's output and visit."""
        row: dict[str, Any] | None = (StepRun.objects.filter(instance_id=instance_id, node_id=node_id,
                                                             status=StepStatus.SUCCEEDED)
                                      .order_by("-visit").values("output", "visit").first())
        return row

    def succeeded_nodes(self, instance_id: int) -> Iterator[str]:
        return iter(StepRun.objects.filter(instance_id=instance_id, status=StepStatus.SUCCEEDED)
                    .values_list("node_id", flat=True).distinct())

    def earlier_attempts(self, instance_id: int, node_id: str, visit: int) -> int:
        total = (StepRun.objects.filter(instance_id=instance_id, node_id=node_id, visit__lt=visit)
                 .aggregate(total=Sum("attempt"))["total"])
        return int(total or 0)

    # --- Committing a step's outcome -------------------------------------------------------------

    def finish(self, instance_id: int, leases: list[tuple[int, str]], decide: Decide, *,
               fresh: WorkflowInstance | None = None) -> Finished:
        """Lock the instance, check the steps' leases, let `decide` record their outcomes, write them.
        Returns the ids of the steps whose leases held (with none, nothing is written), what `decide`
        returned and the unit written. `fresh` is the instance as this worker last committed it; a store may
        write against it without taking the lock first (see postgres.py); this one always locks.
        A unit whose conditional step writes lost a race is decided again, a few times."""
        for attempt in range(STALE_RETRIES):
            try:
                with self.atomic():
                    instance, held = self.lock_with_leases(instance_id, leases)
                    if not held:
                        return Finished(held, None, None)
                    unit, result = decide(instance, held)
                    self.apply(unit)
                return Finished(held, result, unit)
            except StaleWrite:
                if attempt == STALE_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def lock_with_leases(self, instance_id: int, leases: list[tuple[int, str]]) -> tuple[WorkflowInstance, set[int]]:
        """Lock the instance; which of these steps are still running under these lease tokens."""
        if len(leases) == 1:
            instance, holds = self.lock_for_finish(instance_id, *leases[0])
            return instance, {leases[0][0]} if holds else set()
        instance = self.lock_instance(instance_id)
        tokens = dict(leases)
        running = (StepRun.objects.filter(pk__in=list(tokens), status=StepStatus.RUNNING)
                   .values_list("pk", "lease_token"))
        return instance, {pk for pk, token in running if tokens[pk] == token}

    def finish_group(self, requests: list[FinishRequest]) -> list[Finished]:
        """finish for several instances; this store commits each on its own."""
        return [self.finish(r.instance_id, r.leases, r.decide, fresh=r.fresh) for r in requests]

    # --- Writing a unit of work -------------------------------------------------------------------

    def apply(self, unit: UnitOfWork) -> None:
        """Write everything the unit recorded, in the caller's transaction (the runtime registers its
        effects: runtime/effects.py)."""
        inst = unit.instance
        self._apply_steps(unit)
        if unit.close_reviews:
            ReviewItem.objects.filter(instance_id=inst.pk, status="open").update(status="closed",
                                                                                decided_at=unit.now)
        for item in unit.new_reviews:
            item.save(force_insert=True)
        inst.updated_at = unit.now
        delta = unit.delta()
        delta_text = deltas.canonical_text(delta) if delta is not None else None
        due = unit.snapshot_due(len(delta_text) if delta_text else 0)
        state = unit.checkpoint_state(snapshot_refs.refs_for(self, unit)) if due else None
        state_text = canonical_json(state) if state is not None else None
        unit.state_written(len(delta_text) if delta_text is not None else None,
                           len(state_text) if state_text is not None else None)
        # The context itself is never written to the row: its delta and snapshot carry it.
        WorkflowInstance.objects.filter(pk=inst.pk).update(
            **{name: getattr(inst, name) for name in sorted(unit.instance_fields - {"context"})})
        events = [Event(instance_id=inst.pk, seq=e.seq, type=e.type, node_id=e.node_id, step=e.step,
                        payload=unit.event_payload(e), created_at=unit.now)
                  for e in unit.events]
        Event.objects.bulk_create(events)
        if delta is not None and delta_text is not None:
            seq = unit.delta_seq()
            StateDelta.objects.create(instance_id=inst.pk, seq=seq, delta=delta,
                                      checksum=deltas.checksum_text(seq, delta_text), created_at=unit.now)
        if state is not None and state_text is not None:
            Checkpoint.objects.create(instance_id=inst.pk, seq=inst.event_seq, state=state,
                                      checksum=hashlib.sha256(state_text).hexdigest(), created_at=unit.now)
        self.remember_context(unit)

    def apply_many(self, units: list[UnitOfWork]) -> None:
        """Write several units (of different instances) in the caller's transaction."""
        for unit in units:
            self.apply(unit)

    def _apply_steps(self, unit: UnitOfWork) -> None:
        for step in unit.new_steps:
            step.save(force_insert=True)
        for change in unit.changes.values():
            updated = StepRun.objects.filter(pk=change.step.pk, status=change.expect_status).update(**change.fields)
            if not updated:
                raise StaleWrite(f"step {change.step.pk} is no longer {change.expect_status}")

    def remember_context(self, unit: UnitOfWork) -> None:
        """After COMMIT, keep the instance's context in this process's cache under its context_seq
        (store/context_cache.py): continuing the instance then skips reading it back."""
        inst = unit.instance
        context = inst.__dict__.get("context")
        if context is None or inst.pk is None:
            return
        key = (inst.pk, int(inst.context_seq), context_cache.entry_bytes(inst))
        self.on_commit(lambda: context_cache.put(*key, context))

    # --- State reads the snapshot writer needs (store/snapshot_refs.py) -----------------------------

    def delta_key_seqs(self, instance_id: int, after_seq: int) -> dict[str, int]:
        """For each context key set by a delta of the instance after `after_seq`: the seq of the last one."""
        seqs: dict[str, int] = {}
        for seq, delta in (StateDelta.objects.filter(instance_id=instance_id, seq__gt=after_seq)
                           .order_by("seq", "id").values_list("seq", "delta")):
            set_part = delta.get("set") if isinstance(delta, dict) else None
            seqs.update(dict.fromkeys(set_part if isinstance(set_part, dict) else (), seq))
        return seqs

    def snapshot_refs_at(self, instance_id: int, seq: int) -> dict[str, tuple[int, str]] | None:
        """The references of the instance's snapshot at `seq`, None when there is none that verifies."""
        for snapshot in Checkpoint.objects.filter(instance_id=instance_id, seq=seq).order_by("-id"):
            if snapshot.verifies():
                return deltas.referenced(snapshot.state.get("refs"))
        return None


def loads(value: Any) -> Any:
    """A JSON column as read by a raw cursor: text on SQLite (and on PostgreSQL through Django's
    connection), already decoded elsewhere."""
    if isinstance(value, (str, bytes, bytearray)):
        return json.loads(value)
    return value
