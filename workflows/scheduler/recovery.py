"""Recovery from checkpoints.

The instance row and its checkpoint are written in the same transaction, so normally they agree. When
they do not (a row edited by hand, a restore from a backup, a disk error), the newest checkpoint whose
checksum verifies is the state the instance continues from; corrupt ones are skipped and reported
(an event and a log line each).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from workflows import clock, runtime
from workflows.models import Checkpoint

log = logging.getLogger("steadyflow.recovery")


@dataclass
class Recovery:
    checkpoint: Checkpoint | None
    corrupt: list[int] = field(default_factory=list)  # seqs of checkpoints that failed their checksum


def latest_valid_checkpoint(instance_id: int, *, limit: int = 200) -> Recovery:
    corrupt: list[int] = []
    for checkpoint in Checkpoint.objects.filter(instance_id=instance_id).order_by("-seq")[:limit]:
        if checkpoint.verifies():
            return Recovery(checkpoint, corrupt)
        corrupt.append(checkpoint.seq)
        log.error("instance %s: checkpoint at seq %s fails its checksum; skipped", instance_id, checkpoint.seq)
    return Recovery(None, corrupt)


def restore_instance(instance_id: int, actor: Any = None) -> Recovery:
    """Put the instance's context and scheduler state back to its newest valid checkpoint."""
    now = clock.now()
    with transaction.atomic():
        inst = runtime.lock(instance_id)
        found = latest_valid_checkpoint(instance_id)
        tr = runtime.UnitOfWork(inst, runtime.graph_for_version(inst.version_id), now)
        for seq in found.corrupt:
            tr.event("checkpoint_corrupt", checkpoint_seq=seq)
        if found.checkpoint is None:
            tr.checkpoint = False
            runtime.apply(tr)
            return found
        saved: dict[str, Any] = found.checkpoint.state
        tr.set_instance(context=saved["context"], state=saved["state"], loop_count=saved["loop_count"],
                        open_steps=saved["open_steps"])
        tr.event("instance_restored", checkpoint_seq=found.checkpoint.seq,
                 by=actor.get_username() if getattr(actor, "pk", None) else "system")
        runtime.apply(tr)
    return found
