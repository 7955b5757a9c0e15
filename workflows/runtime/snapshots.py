"""When a transition writes a full snapshot of the instance's state (docs/DESIGN.md "State: deltas
and snapshots").

Every transition that changes the context writes its delta. A snapshot is also written:

- at the states an operator or a recovery starts from: a halt, an end (completed, failed,
  cancelled, compensated) and the start of compensation, and when an operator reopens one of them
  (a resume, a retry, a rerun);
- every STEADYFLOW["SNAPSHOT_EVERY_EVENTS"] events since the last one (a bound on the deltas a
  rebuild replays, however small they are);
- once the deltas since the last snapshot reach max(STEADYFLOW["SNAPSHOT_MIN_BYTES"], the size of
  that snapshot): each snapshot is then paid for by at least as many bytes of deltas, so snapshots
  cost at most about as much again as the deltas themselves (the arithmetic is in DESIGN.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workflows.engine.statuses import InstanceStatus
from workflows.runtime.config import conf

if TYPE_CHECKING:
    from workflows.store.unit import UnitOfWork

SNAPSHOT_STATUSES = frozenset({InstanceStatus.HALTED, InstanceStatus.COMPLETED, InstanceStatus.FAILED,
                               InstanceStatus.CANCELLED, InstanceStatus.COMPENSATING,
                               InstanceStatus.COMPENSATED})


def due(unit: UnitOfWork, delta_bytes: int) -> bool:
    if unit.checkpoint is not None:
        return unit.checkpoint
    inst = unit.instance
    if str(inst.status) != unit.loaded_status and (inst.status in SNAPSHOT_STATUSES
                                                    or unit.loaded_status in SNAPSHOT_STATUSES):
        return True
    if inst.event_seq - inst.snapshot_seq >= conf("SNAPSHOT_EVERY_EVENTS") and (delta_bytes or inst.delta_bytes):
        return True
    return bool(delta_bytes) and inst.delta_bytes + delta_bytes >= max(conf("SNAPSHOT_MIN_BYTES"), inst.snapshot_bytes)
