"""The runtime's UnitOfWork: the store's unit of work (workflows/store/unit.py, the contract a store
writes) with the runtime's snapshot policy (runtime/snapshots.py), which the store asks at write time,
once it knows the size of the transition's delta.

Every unit the runtime decides is one of these; the stores, the commit observers and the effects
(runtime/effects.py) only need the store's.
"""

from __future__ import annotations

from workflows.runtime import snapshots
from workflows.store import unit as store_unit


class UnitOfWork(store_unit.UnitOfWork):
    def snapshot_due(self, delta_bytes: int) -> bool:
        return snapshots.due(self, delta_bytes)
