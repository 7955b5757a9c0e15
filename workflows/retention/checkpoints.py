"""Pruning superseded checkpoints of active instances (docs/operating-retention.md).

Recovery takes an instance's newest checkpoint that verifies (workflows/scheduler/recovery.py), falling back to
older ones only when newer ones fail their checksum. An active instance keeps its newest
STEADYFLOW_CHECKPOINTS_KEEP checkpoints that verify and everything newer than the oldest of them (a newer
corrupt one is evidence, and cheap); older ones go. Finished instances are left to the history
retention (workflows/retention/history.py), which deletes all of them with the rest of the history.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count

from workflows.engine import deltas
from workflows.engine.statuses import INSTANCE_ACTIVE
from workflows.models import Checkpoint, StateDelta


def floor_seq(instance_id: int, keep: int) -> int | None:
    """The seq of the `keep`-th newest checkpoint that verifies, or None when there are fewer. Loads
    one checkpoint at a time: a state can be megabytes."""
    verified = 0
    for pk in Checkpoint.objects.filter(instance_id=instance_id).order_by("-seq").values_list("pk", flat=True):
        checkpoint = Checkpoint.objects.filter(pk=pk).first()
        if checkpoint is not None and checkpoint.verifies():
            verified += 1
            if verified == keep:
                return checkpoint.seq
    return None


def referenced_seqs(instance_id: int, floor: int) -> set[int]:
    """The seqs of the deltas the instance's snapshots from `floor` on refer to."""
    seqs: set[int] = set()
    for state in Checkpoint.objects.filter(instance_id=instance_id, seq__gte=floor).values_list("state", flat=True):
        refs = deltas.referenced(state.get("refs") if isinstance(state, dict) else None)
        seqs.update(seq for seq, _ in refs.values())
    return seqs


def prune(batch: int, *, keep: int | None = None, dry_run: bool = False) -> int:
    """Prune up to `batch` active instances with more than `keep` checkpoints: the checkpoints deleted
    (counted on a dry run)."""
    keep = keep or int(settings.STEADYFLOW["CHECKPOINTS_KEEP"])
    crowded = list(Checkpoint.objects.filter(instance__status__in=INSTANCE_ACTIVE).order_by()
                   .values("instance_id").annotate(n=Count("id")).filter(n__gt=keep)
                   .values_list("instance_id", flat=True)[:batch])
    pruned = 0
    for instance_id in crowded:
        floor = floor_seq(instance_id, keep)
        if floor is None:
            continue
        older = Checkpoint.objects.filter(instance_id=instance_id, seq__lt=floor)
        pruned += older.count() if dry_run else older.delete()[0]
        if not dry_run:
            # The deltas the oldest kept snapshot already holds are never replayed again; those a kept
            # snapshot refers to for a large value stay (docs/DESIGN.md, "Snapshots by reference").
            StateDelta.objects.filter(instance_id=instance_id, seq__lte=floor).exclude(
                seq__in=referenced_seqs(instance_id, floor)).delete()
    return pruned
