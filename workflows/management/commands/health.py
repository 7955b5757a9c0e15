"""`manage.py health`: a probe for operators and orchestrators (exit 0 = healthy).

Checks that the database and Redis answer, and names the instances that made no progress for
longer than --threshold seconds although they have something to do:
- a step that is due (queued, or a timer/retry whose time has come) and nobody runs it;
- a step that is running but whose worker stopped heartbeating;
- or no open step at all while the instance is still active (nothing can move it on).
An instance waiting for a person (a human task, or halted into the review queue) or for a timer
that is not yet due is not stuck: it is waiting, and the review queue shows it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError, connection
from django.utils import timezone

from workflows.engine.statuses import INSTANCE_ACTIVE, STEP_OPEN, InstanceStatus, StepStatus

# Statuses in which an instance is expected to move on by itself.
PROBED = (*sorted(INSTANCE_ACTIVE), InstanceStatus.COMPENSATING)
LIST_LIMIT = 100


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

    now = now or timezone.now()
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


def check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        return f"unreachable: {exc}".strip()
    return None


def check_redis() -> str | None:
    import redis

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3, socket_timeout=3)
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError) as exc:
        return f"unreachable at {settings.REDIS_URL}: {exc}"
    return None


class Command(BaseCommand):
    help = ("Health probe: exits 0 and prints OK when the database and Redis answer and no active instance "
            "has been without progress for longer than --threshold seconds; otherwise exits 1 and names "
            "the problems (stuck instances with the step that holds each up).")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--threshold", type=float, default=None,
                            help="seconds without progress before an instance counts as stuck "
                                 "(default STEADYFLOW_STUCK_AFTER_S, 300)")
        parser.add_argument("--json", action="store_true", help="print the result as one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        threshold = options["threshold"]
        if threshold is None:
            threshold = float(settings.STEADYFLOW.get("STUCK_AFTER_S", 300.0))
        if threshold <= 0:
            self.stderr.write("--threshold must be a positive number of seconds")
            sys.exit(2)
        database = check_database()
        redis_problem = check_redis()
        stuck = find_stuck(threshold) if database is None else []
        healthy = database is None and redis_problem is None and not stuck
        if options["json"]:
            self.stdout.write(json.dumps({
                "ok": healthy, "threshold_s": threshold,
                "database": database or "ok", "redis": redis_problem or "ok",
                "stuck": [asdict(s) for s in stuck[:LIST_LIMIT]], "stuck_count": len(stuck),
            }))
        else:
            self._print(threshold, database, redis_problem, stuck)
        if not healthy:
            sys.exit(1)

    def _print(self, threshold: float, database: str | None, redis_problem: str | None,
               stuck: list[StuckInstance]) -> None:
        problems = []
        if database:
            problems.append(f"database: {database}")
        if redis_problem:
            problems.append(f"redis: {redis_problem}")
        if stuck:
            problems.append(f"{len(stuck)} stuck instance(s): no progress for more than {threshold:g} s")
            for s in stuck[:LIST_LIMIT]:
                problems.append(f"  instance {s.id} ({s.definition} v{s.version}, {s.status}, "
                                f"idle {s.idle_s:g} s): {s.reason}")
            if len(stuck) > LIST_LIMIT:
                problems.append(f"  ... and {len(stuck) - LIST_LIMIT} more")
        if not problems:
            self.stdout.write(f"OK: database and Redis reachable; no instance without progress for more "
                              f"than {threshold:g} s")
            return
        for line in problems:
            self.stdout.write(line)
