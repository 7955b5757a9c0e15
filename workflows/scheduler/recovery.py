"""Recovery from snapshots and deltas (docs/DESIGN.md "State: deltas and snapshots").

An instance's context is its newest snapshot whose checksum verifies plus the verified deltas after
it; every read of it (store/state_reads.py) already skips a corrupt snapshot for an older one and
stops replaying at a corrupt delta. `restore_instance` makes that explicit for an operator (the
`recover` command): it reports each corrupt row (an event and a log line each), sets the context to
what the valid rows give and writes a fresh snapshot of it on top, so later reads start from there.
The scheduler state, counters and status are the instance row's, written by every transition.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from workflows import clock, runtime
from workflows.models import Checkpoint
from workflows.store.state_reads import creation_context_of, newest_snapshot, rebuild

log = logging.getLogger("steadyflow.recovery")


@dataclass
class Recovery:
    checkpoint: Checkpoint | None  # the snapshot the state was rebuilt from
    corrupt: list[int] = field(default_factory=list)  # seqs of snapshots that failed their checksum
    corrupt_delta: int | None = None  # seq of the first delta that failed its checksum
    replayed: int = 0  # deltas applied on top of the snapshot


def latest_valid_checkpoint(instance_id: int) -> Recovery:
    snapshot, corrupt = newest_snapshot(instance_id)
    return Recovery(snapshot, corrupt)


def restore_instance(instance_id: int, actor: Any = None) -> Recovery:
    """Set the instance's context to its newest valid snapshot plus the valid deltas after it, and
    snapshot that."""
    now = clock.now()
    with transaction.atomic():
        inst = runtime.lock(instance_id)
        rebuilt = rebuild(instance_id, creation_context_of(inst))
        found = Recovery(rebuilt.snapshot, rebuilt.corrupt_snapshots, rebuilt.corrupt_delta, rebuilt.replayed)
        tr = runtime.UnitOfWork(inst, runtime.graph_for_version(inst.version_id), now)
        for seq in found.corrupt:
            tr.event("checkpoint_corrupt", checkpoint_seq=seq)
        if found.corrupt_delta is not None:
            tr.event("checkpoint_corrupt", delta_seq=found.corrupt_delta)
        # No snapshot verifies: the context the instance was created with is the base (the deltas
        # from its start are kept while no snapshot supersedes them).
        tr.set_instance(context=rebuilt.context)
        tr.checkpoint = True
        # Every value copied: the newest deltas, which a snapshot would refer to, may be the damaged ones.
        tr.snapshot_inline = True
        tr.event("instance_restored", checkpoint_seq=found.checkpoint.seq if found.checkpoint else 0,
                 replayed=found.replayed,
                 by=actor.get_username() if getattr(actor, "pk", None) else "system")
        runtime.apply(tr)
    return found
