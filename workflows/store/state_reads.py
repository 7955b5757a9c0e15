"""Reading state back from snapshots and deltas (docs/DESIGN.md "State: deltas and snapshots").

- `current_context(instance)`: what `instance.context` reads on a loaded instance (fields.py): this
  process's cache of the context it last committed when the row's context_seq matches it, else
  the newest snapshot that verifies plus the deltas after it.
- `rebuild(instance_id, upto=seq)`: the context as of any event seq (rerun-from-node, recovery),
  reporting the snapshots and the delta that failed their checksums.

Snapshots are tried newest first, one row at a time (only their seqs and checksums are listed), so
a corrupt newest snapshot costs one more read, not a read of every snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from workflows import fields
from workflows.engine import deltas
from workflows.store import context_cache

log = logging.getLogger("steadyflow.recovery")
SNAPSHOT_TRIES = 200


@dataclass
class Rebuilt:
    context: dict[str, Any]
    snapshot: Any = None  # the Checkpoint it started from (None: the instance's creation context)
    corrupt_snapshots: list[int] = field(default_factory=list)  # seqs of snapshots that failed their checksum
    corrupt_delta: int | None = None  # seq of the first delta that failed its checksum (replay stopped there)
    replayed: int = 0  # deltas applied
    seq: int = 0  # the seq it was rebuilt at, when asked for one (rerun-from-node)


def snapshot_context(snapshot: Any) -> dict[str, Any] | None:
    """A verified snapshot's context: its inline values and those it refers to in deltas (store/
    snapshot_refs.py), each reference checked; None when one does not lead to its value."""
    from workflows.models import StateDelta

    state = snapshot.state if isinstance(snapshot.state, dict) else {}
    inline = state.get("context") or {}
    refs = deltas.referenced(state.get("refs"))
    if not refs:
        return dict(inline)
    sets: dict[int, Any] = {}
    for row in StateDelta.objects.filter(instance_id=snapshot.instance_id, seq__in={seq for seq, _ in refs.values()}):
        if row.verifies() and isinstance(row.delta, dict) and isinstance(row.delta.get("set"), dict):
            sets[row.seq] = row.delta["set"]
        else:
            sets.setdefault(row.seq, None)
    return deltas.resolve(inline, refs, sets)


def newest_snapshot(instance_id: int, upto: int | None = None) -> tuple[Any, list[int]]:
    """The newest snapshot at or before `upto` whose checksum verifies and whose references lead to
    their values, and the seqs of the newer ones that did not (each logged). The snapshot comes with
    its context resolved (`resolved_context`)."""
    from workflows.models import Checkpoint

    rows = Checkpoint.objects.filter(instance_id=instance_id)
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    corrupt: list[int] = []
    for pk, seq in rows.order_by("-seq", "-id").values_list("pk", "seq")[:SNAPSHOT_TRIES]:
        snapshot = Checkpoint.objects.filter(pk=pk).first()
        if snapshot is None:
            continue  # pruned meanwhile
        if not snapshot.verifies():
            corrupt.append(seq)
            log.error("instance %s: snapshot at seq %s fails its checksum; skipped", instance_id, seq)
            continue
        context = snapshot_context(snapshot)
        if context is None:
            corrupt.append(seq)
            log.error("instance %s: snapshot at seq %s refers to a delta that is missing, damaged or holds another "
                      "value; skipped", instance_id, seq)
            continue
        snapshot.resolved_context = context
        return snapshot, corrupt
    return None, corrupt


def rebuild(instance_id: int, creation_context: Callable[[], dict[str, Any]], *,
            upto: int | None = None, deltas_upto: int | None = None, look_for_snapshot: bool = True) -> Rebuilt:
    """The context after every transition that began at or before `upto` (all of them when None);
    `deltas_upto` bounds only the deltas replayed (the current context: the row's context_seq)."""
    from workflows.models import StateDelta

    snapshot, corrupt = newest_snapshot(instance_id, upto) if look_for_snapshot else (None, [])
    if snapshot is not None:
        context = dict(snapshot.resolved_context or {})
        base_seq = snapshot.seq
    else:
        context = dict(creation_context())
        base_seq = 0
    found = Rebuilt(context, snapshot, corrupt)
    rows = StateDelta.objects.filter(instance_id=instance_id, seq__gt=base_seq)
    bound = upto if deltas_upto is None else deltas_upto
    if bound is not None:
        rows = rows.filter(seq__lte=bound)
    for row in rows.order_by("seq", "id"):
        if not row.verifies():
            found.corrupt_delta = row.seq
            log.error("instance %s: state delta at seq %s fails its checksum; replay stops before it",
                      instance_id, row.seq)
            break
        deltas.apply(context, row.delta)
        found.replayed += 1
    return found


def creation_context_of(instance: Any) -> Callable[[], dict[str, Any]]:
    def read() -> dict[str, Any]:
        data = instance.__dict__
        if "_context_column" in data:
            return dict(data["_context_column"] or {})
        from workflows.models import WorkflowInstance

        value = WorkflowInstance.objects.filter(pk=instance.pk).values_list("context", flat=True).first()
        return dict(value or {})

    return read


def current_context(instance: Any) -> dict[str, Any]:
    if instance.pk is None:
        return {}
    seq = int(instance.context_seq)
    if seq == 0:
        # No transition ever changed it: the context it was created with, no read (most no-op steps).
        return creation_context_of(instance)()
    cached = context_cache.get(instance.pk, seq)
    if cached is not None:
        return cached
    # A delta's seq is the first event seq of its transition, so the deltas up to context_seq are
    # those of every transition up to the last one that changed the context.
    # snapshot_seq 0: none was ever written (the deltas from the start apply to the creation context).
    found = rebuild(instance.pk, creation_context_of(instance), deltas_upto=seq,
                    look_for_snapshot=bool(instance.snapshot_seq))
    context = found.context
    if not connection.in_atomic_block and (found.snapshot is None or found.snapshot.seq <= seq):
        # Committed (autocommit read): safe to keep under its seq. Inside a transaction the rows may
        # be this transaction's own, not yet committed; the writer caches them after COMMIT.
        context_cache.put(instance.pk, seq, context_cache.entry_bytes(instance), context)
    return context


fields.CONTEXT_LOADER[:] = [current_context]  # instance.context reads through here (workflows/fields.py)
