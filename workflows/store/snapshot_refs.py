"""Which delta holds each large value a snapshot refers to instead of copying it (docs/DESIGN.md,
"Snapshots by reference").

A snapshot written by a transition names each of the context's large values (engine/deltas.py
`large_keys`) by the seq of the delta that last set it. That seq is found, newest first, in:
the transition's own delta (written in the same transaction); the deltas since the instance's last
snapshot (`delta_key_seqs`, the store's one read of them: keys and seqs only); the last snapshot's
own references, when it verifies. A value found in none of them (it came with the instance's
creation context, or its delta was pruned with no snapshot referring to it) is copied inline, as
every value was before; so is every value of a snapshot a recovery writes (`unit.snapshot_inline`:
it was rebuilt around damaged rows, which the newest deltas may be). Each reference carries a digest
of its value, checked when the snapshot is read: a reference that does not lead to the value the
snapshot was taken with makes the snapshot unusable, like a failed checksum.

The lookups run before the transition's writes, in its transaction: deltas are never changed once
written, and only the holder of the instance (its lock, or the event seq its commit is guarded by)
writes new ones, so what they return is what the snapshot is committed with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings

from workflows.engine import deltas

if TYPE_CHECKING:
    from workflows.store.orm import OrmStore
    from workflows.store.unit import UnitOfWork


def threshold() -> int:
    return int(settings.STEADYFLOW.get("SNAPSHOT_REF_BYTES", 0))


def refs_for(store: OrmStore, unit: UnitOfWork) -> dict[str, list[Any]]:
    """{key: [seq, digest]} for the unit's snapshot (deltas.reference); call before
    unit.state_written (it reads the instance's last snapshot seq as loaded)."""
    inst = unit.instance
    if unit.snapshot_inline:
        return {}
    context = inst.context
    seqs = _seqs(store, unit, set(deltas.large_keys(context, threshold())))
    return {key: deltas.reference(seq, context[key]) for key, seq in sorted(seqs.items())}


def _seqs(store: OrmStore, unit: UnitOfWork, wanted: set[str]) -> dict[str, int]:
    inst = unit.instance
    if not wanted:
        return {}
    refs: dict[str, int] = {}
    own = unit.delta()
    if own is not None:
        for key in wanted & set(own["set"]):
            refs[key] = unit.delta_seq()
    wanted -= set(refs)
    base = int(inst.snapshot_seq)
    if wanted and inst.pk is not None:
        since = store.delta_key_seqs(inst.pk, base)
        refs.update({key: since[key] for key in wanted if key in since})
        wanted -= set(refs)
    if wanted and base:
        # None: that snapshot is gone or fails its checksum; the values left are then copied.
        earlier = store.snapshot_refs_at(inst.pk, base) or {}
        refs.update({key: earlier[key][0] for key in wanted if key in earlier})
    return refs


def inline_context(context: dict[str, Any], refs: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in context.items() if key not in refs} if refs else context
