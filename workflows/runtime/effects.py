"""What follows a commit: the post-commit effects of the units of work the runtime has a store write.

The store only writes (workflows/store/); the runtime has it write a unit and then registers, still
inside the transaction, what runs once it commits (`transaction.on_commit`; outside a transaction that
is at once, the store having committed already). A rolled-back transaction runs none of them. For
each unit, in this order:

- the commit observers (runtime/observe.py: metrics, spans);
- its jobs on their RQ queues (workflows/workers/dispatch.py; Redis away: the reconciler re-enqueues);
- the live notice of its events (workflows/live/notices.py);
- the commit hooks of the layers above the runtime (the notifications, workflows/triggers/, registered
  at start-up by workflows/apps.py);
- its sub-workflow effects (settle a parent, cancel or compensate children: runtime/subflows.py),
  each failure logged (the reconciler repeats what an effect did not do). A unit records them by
  name (`UnitOfWork.after_commit(name, *args)`), run by the action registered under the name:
  the modules that decide them (stopping, compensation) need not import runtime/subflows, which
  decides with them (no import cycle), and subflows registers its actions when it is imported (the
  package imports it, so before any unit is written).

Several units written together (a bulk start) share one enqueue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from django.db import transaction

from workflows.live import notices as live
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import observe
from workflows.store.unit import UnitOfWork
from workflows.workers import dispatch

log = logging.getLogger("steadyflow.runtime")

OnCommit = Callable[[Callable[[], object]], None]
CommitHook = Callable[[UnitOfWork, OnCommit], None]
hooks: list[CommitHook] = []
actions: dict[str, Callable[..., Any]] = {}


class Writer(Protocol):
    """What of a store the effects need: its writes of units (workflows/store/orm.py)."""

    def apply(self, unit: UnitOfWork) -> None: ...

    def apply_many(self, units: list[UnitOfWork]) -> None: ...


def add_hook(hook: CommitHook) -> None:
    """A layer above the runtime acting on every committed unit: `hook(unit, on_commit)` is called at
    write time and registers what it does after COMMIT (it looks only at the unit, in memory)."""
    if hook not in hooks:
        hooks.append(hook)


def register(name: str, action: Callable[..., Any]) -> None:
    """The action a unit's post-commit effect `name` runs (UnitOfWork.after_commit)."""
    actions[name] = action


def write(store: Writer, unit: UnitOfWork) -> None:
    """Have the store write the unit (in the caller's transaction), its effects after COMMIT."""
    store.apply(unit)
    after_commit(unit)


def write_many(store: Writer, units: Sequence[UnitOfWork]) -> None:
    """Several units of different instances in one write; their jobs enqueued together after COMMIT."""
    store.apply_many(list(units))
    after_commit_many(units)


def after_commit(unit: UnitOfWork) -> None:
    """The effects of one written unit, registered to run after its transaction commits."""
    if observe.observers:
        transaction.on_commit(lambda: observe.committed(unit))
    jobs = unit.jobs()
    if jobs:
        transaction.on_commit(lambda: dispatch.enqueue_steps(jobs, batch=True))
    announced = announced_range(unit)
    if announced is not None:
        transaction.on_commit(lambda: live.publish_commit(*announced))
    for hook in hooks:
        hook(unit, transaction.on_commit)
    run_after_commit(unit.effects)


def after_commit_many(units: Sequence[UnitOfWork]) -> None:
    """The effects of several units: all their jobs in one enqueue (no batching across instances)."""
    jobs = [job for unit in units for job in unit.jobs()]
    announced = [a for a in (announced_range(unit) for unit in units) if a is not None]

    def effects() -> None:
        if observe.observers:
            for unit in units:
                observe.committed(unit)
        if jobs:
            dispatch.enqueue_steps(jobs)
        for notice in announced:
            live.publish_commit(*notice)

    transaction.on_commit(effects)
    for unit in units:
        for hook in hooks:
            hook(unit, transaction.on_commit)
    run_after_commit([effect for unit in units for effect in unit.effects])


def run_after_commit(effects: list[tuple[str, tuple[Any, ...]]]) -> None:
    if effects:
        def run_all() -> None:
            for name, args in effects:
                run_effect(name, *args)

        transaction.on_commit(run_all)


def run_effect(name: str, *args: Any) -> None:
    """Run a post-commit effect; a failure is logged, never raised into the commit's caller (the
    reconciler repeats what an effect did not do)."""
    try:
        actions[name](*args)
    except Exception:  # noqa: BLE001 - the reconciler's backstop
        log.exception("sub-workflow effect %s failed; the reconciler will retry it", name)


def announced_range(unit: UnitOfWork) -> tuple[int, int, int] | None:
    """What the live view is told after the commit: the instance and its new events' seq range
    (the web process reads the events themselves from the log)."""
    if not unit.events:
        return None
    return unit.instance.pk, unit.events[0].seq, unit.events[-1].seq


def claimed(groups: list[tuple[WorkflowInstance, list[StepRun]]]) -> None:
    """Tell the live view about the step_started events a one-statement claim committed (numbered in
    step id order, ending at the instance's event seq)."""
    for instance, steps in groups:
        live.publish_commit(instance.pk, instance.event_seq - len(steps) + 1, instance.event_seq)
