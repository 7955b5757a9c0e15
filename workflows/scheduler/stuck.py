"""Instances without progress: active, with nothing running or due that anyone is moving on.

`find_stuck` names the instances with no progress for longer than a threshold although they have
something to do:
- a step that is due (queued, or a timer/retry whose time has come) and nobody runs it;
- a step that is running but whose worker stopped heartbeating;
- or no open step at all while the instance is still active (nothing can move it on).
An instance waiting for a person (a human task, or halted into the review queue) or for a timer
that is not yet due is not stuck: it is waiting, and the review queue shows it.
Used by `manage.py health` (workflows/operators/health.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from workflows import clock
from workflows.engine.statuses import INSTANCE_ACTIVE, STEP_OPEN, InstanceStatus, StepStatus

# Statuses in which an instance is expected to move on by itself.
PROBED = (*sorted(INSTANCE_ACTIVE), InstanceStatus.COMPENSATING)


@dataclass
class StuckInstance:
    id: int
    definition: str
    version: int
    status: str
    idle_s: float
    reason: str
    steps: list[dict[str, Any]] = field(default_factory=list)


def overdue_reason(step: Any, cutoff: datetime) -> str | None:
    """Why this open step holds its instance up, or None when it is fine (or legitimately waiting)."""
    if step.status == StepStatus.RUNNING:
        beat = step.heartbeat_at or step.started_at
        if beat is None or beat < cutoff:
            return f"step {step.node_id}#{step.visit} is running on {step.worker or '?'} without a heartbeat"
        return None
    if step.status in (StepStatus.QUEUED, StepStatus.RETRYING, StepStatus.PENDING):
        if step.due_at is None:
            return None  # parked: a human task, or held while the instance is halted
        if step.due_at < cutoff:
            return (f"step {step.node_id}#{step.visit} is {step.status} and was due at "
                    f"{step.due_at.isoformat()}")
    return None


def find_stuck(threshold_s: float, now: datetime | None = None) -> list[StuckInstance]:
    from django.db.models import Exists, OuterRef, Q

    from workflows.models import StepRun, WorkflowInstance

    now = now or clock.now()
    cutoff = now - timedelta(seconds=threshold_s)
    steps_of = StepRun.objects.filter(instance=OuterRef("pk"))
    # In SQL first, so thousands of instances waiting on people never hide the stuck ones.
    overdue = steps_of.filter(
        Q(status=StepStatus.RUNNING) & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
        | Q(status__in=(StepStatus.QUEUED, StepStatus.RETRYING, StepStatus.PENDING), due_at__lt=cutoff))
    idle = list(WorkflowInstance.objects.filter(status__in=PROBED, updated_at__lt=cutoff)
                .filter(Exists(overdue) | ~Exists(steps_of.filter(status__in=STEP_OPEN)))
                .select_related("version__definition").order_by("updated_at")[:1000])
    open_steps: dict[int, list[Any]] = {}
    for step in StepRun.objects.filter(instance__in=idle, status__in=STEP_OPEN).order_by("id"):
        open_steps.setdefault(step.instance_id, []).append(step)
    stuck = []
    for inst in idle:
        steps = open_steps.get(inst.pk, [])
        reasons = [(s, r) for s in steps if (r := overdue_reason(s, cutoff))]
        if steps and not reasons:
            continue  # it moved on between the two queries
        reason = reasons[0][1] if reasons else "it is active but has no open step to move it on"
        stuck.append(StuckInstance(
            id=inst.pk, definition=inst.version.definition.slug, version=inst.version.number,
            status=inst.status, idle_s=round((now - inst.updated_at).total_seconds(), 1), reason=reason,
            steps=[{"id": s.pk, "node": s.node_id, "visit": s.visit, "status": s.status, "problem": r}
                   for s, r in reasons]))
    return stuck
