"""Instance and step statuses, each with one explicit transition table.

Plain `enum.StrEnum`s, not Django's TextChoices, so the engine imports no Django (docs/DESIGN.md): a
member is its value (`StepStatus.FAILED == "failed"`, also as a dict key), and the models build their
field choices from these enums (workflows/models.py).
"""

from __future__ import annotations

import enum


class InstanceStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    HALTED = "halted"
    CANCELLED = "cancelled"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"


class StepStatus(enum.StrEnum):
    # created, not due: a timer (due_at set), a human task, or parked while the instance is halted
    PENDING = "pending"
    QUEUED = "queued"  # due: a job is (or should be) on its queue
    RUNNING = "running"  # claimed by a worker under a lease
    RETRYING = "retrying"  # failed an attempt, waiting for its backoff
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"  # dead path: no incoming edge fired
    CANCELLED = "cancelled"  # the instance stopped before the step ran
    COMPENSATED = "compensated"


_I = InstanceStatus
INSTANCE_TRANSITIONS: dict[str, frozenset[str]] = {
    _I.PENDING: frozenset({_I.RUNNING, _I.FAILED, _I.CANCELLED}),
    _I.RUNNING: frozenset({_I.WAITING, _I.COMPLETED, _I.FAILED, _I.HALTED, _I.CANCELLED}),
    _I.WAITING: frozenset({_I.RUNNING, _I.COMPLETED, _I.FAILED, _I.HALTED, _I.CANCELLED}),
    _I.HALTED: frozenset({_I.RUNNING, _I.WAITING, _I.COMPENSATING, _I.FAILED, _I.CANCELLED}),
    # -> running from a stopped status: only an operator's "retry the failed step" or "rerun from a
    # node" (workflows/operators/operations.py); the engine itself never reopens an instance.
    _I.FAILED: frozenset({_I.COMPENSATING, _I.RUNNING}),
    _I.COMPENSATING: frozenset({_I.COMPENSATED, _I.HALTED, _I.FAILED}),
    # -> compensating: a sub-workflow whose parent compensates (workflows/runtime/subflows.py).
    _I.COMPLETED: frozenset({_I.RUNNING, _I.COMPENSATING}),
    _I.CANCELLED: frozenset({_I.RUNNING}),
    _I.COMPENSATED: frozenset(),
}

_S = StepStatus
STEP_TRANSITIONS: dict[str, frozenset[str]] = {
    # -> succeeded: a human task answered (its step waits pending, not running, for the person).
    # -> retrying/failed: the child instance a sub-workflow step waits for failed.
    _S.PENDING: frozenset({_S.QUEUED, _S.CANCELLED, _S.SKIPPED, _S.SUCCEEDED, _S.RETRYING, _S.FAILED}),
    _S.QUEUED: frozenset({_S.RUNNING, _S.CANCELLED, _S.PENDING}),
    _S.RUNNING: frozenset({_S.SUCCEEDED, _S.FAILED, _S.RETRYING, _S.QUEUED, _S.PENDING, _S.CANCELLED}),
    _S.RETRYING: frozenset({_S.QUEUED, _S.CANCELLED, _S.FAILED, _S.PENDING}),
    _S.SUCCEEDED: frozenset({_S.COMPENSATED}),
    _S.FAILED: frozenset({_S.QUEUED}),  # an operator's "retry the failed step"
    _S.SKIPPED: frozenset(),
    _S.CANCELLED: frozenset(),
    _S.COMPENSATED: frozenset(),
}

INSTANCE_FINAL = frozenset({_I.COMPLETED, _I.FAILED, _I.CANCELLED, _I.COMPENSATED})
INSTANCE_ACTIVE = frozenset({_I.PENDING, _I.RUNNING, _I.WAITING})
STEP_OPEN = frozenset({_S.PENDING, _S.QUEUED, _S.RUNNING, _S.RETRYING})


class IllegalTransition(Exception):
    def __init__(self, kind: str, current: str, target: str) -> None:
        # str(): an enum member's repr would read "StepStatus.FAILED" instead of 'failed'
        super().__init__(f"{kind} cannot go from {str(current)!r} to {str(target)!r}")
        self.current = str(current)
        self.target = str(target)


def check_instance_transition(current: str, target: str) -> None:
    if target not in INSTANCE_TRANSITIONS[current]:
        raise IllegalTransition("instance", current, target)


def check_step_transition(current: str, target: str) -> None:
    if target not in STEP_TRANSITIONS[current]:
        raise IllegalTransition("step", current, target)
