"""Transitions begun outside a worker's step: cancelling an instance (API, dashboard, a parent's
cancellation), expiring one past its deadline (the reconciler), and `lock`/`apply` for the
operators' decisions (review.py, operations.py, recovery.py) on an instance locked in their own
transaction.
"""

from __future__ import annotations

from datetime import datetime

from workflows import clock
from workflows import store as stores
from workflows.engine.statuses import INSTANCE_ACTIVE, InstanceStatus
from workflows.models import WorkflowInstance
from workflows.runtime import effects
from workflows.runtime.config import graph_for_version
from workflows.runtime.stopping import expire, stop_instance
from workflows.runtime.unit import UnitOfWork


def expire_instance(instance_id: int, now: datetime | None = None) -> bool:
    """TTL: stop an instance past its deadline. False when it was already final or not yet due."""
    now = now or clock.now()
    store = stores.get_store()
    with store.atomic():
        inst = store.lock_instance(instance_id)
        if inst.status not in INSTANCE_ACTIVE or not inst.deadline or inst.deadline >= now:
            return False
        uow = UnitOfWork(inst, graph_for_version(inst.version_id), now)
        expire(uow)
        effects.write(store, uow)
    return True


def cancel_instance(instance_id: int, reason: str = "cancelled by request", now: datetime | None = None) -> bool:
    now = now or clock.now()
    store = stores.get_store()
    with store.atomic():
        inst = store.lock_instance(instance_id)
        if inst.status not in INSTANCE_ACTIVE and inst.status != InstanceStatus.HALTED:
            return False
        uow = UnitOfWork(inst, graph_for_version(inst.version_id), now)
        stop_instance(uow, InstanceStatus.CANCELLED, "cancelled", {"message": reason})
        effects.write(store, uow)
    return True


def lock(instance_id: int) -> WorkflowInstance:
    """Lock an instance for a transition (inside the caller's transaction)."""
    return stores.get_store().lock_instance(instance_id)


def apply(uow: UnitOfWork) -> None:
    """Write a unit of work decided on an instance locked with `lock` (inside the same transaction);
    its effects run after COMMIT."""
    effects.write(stores.get_store(), uow)
