"""The instance's steps as the transition in progress has decided them so far.

A transition reads the other steps of its (locked) instance through the store, then sees its own
decisions on them (UnitOfWork.as_decided): a step it cancelled earlier in the same unit is no longer
open. `ACTIVE` are the statuses that count against `max_concurrency`.
"""

from __future__ import annotations

from collections.abc import Iterable

from workflows import store as stores
from workflows.engine.statuses import StepStatus
from workflows.models import StepRun
from workflows.runtime.unit import UnitOfWork

# Steps that count against max_concurrency.
ACTIVE = (StepStatus.QUEUED, StepStatus.RUNNING, StepStatus.RETRYING)


def steps_of(uow: UnitOfWork, statuses: Iterable[str], *, node_types: Iterable[str] | None = None,
             exclude_types: Iterable[str] | None = None, parked_only: bool = False) -> list[StepRun]:
    """The instance's steps in these statuses, as this transition has decided them so far."""
    statuses = frozenset(statuses)
    types = frozenset(node_types) if node_types is not None else None
    excluded = frozenset(exclude_types or ())

    def keep(step: StepRun) -> bool:
        return (step.status in statuses and (types is None or step.node_type in types)
                and step.node_type not in excluded and (not parked_only or step.due_at is None))

    loaded = stores.get_store().steps_of(uow.instance.pk, statuses, node_types=node_types,
                                         exclude_types=exclude_types, parked_only=parked_only)
    return uow.as_decided(loaded, keep)
