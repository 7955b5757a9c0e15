"""The operations dashboard's figures (GET /api/dashboard and the home page): instances by status,
steps per minute with their latencies, open reviews, breakers, queues and recent failures. The pages
render them and the endpoint answers them, so they sit below both (tests/layers.py).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import Count

from dashboard.api.shapes import breakers
from dashboard.api.shapes import iso as _iso
from workflows import clock
from workflows.authoring import plans
from workflows.engine.nodes import unmeasured_kinds
from workflows.engine.priorities import queue_names
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.models import ReviewItem, ReviewStatus, StepRun, WorkflowInstance

log = logging.getLogger("steadyflow.dashboard")

QUEUES = ("ai", "io", "default")
SERIES_CACHE_S = 5.0  # the per-minute chart: the one figure whose cost grows with the step rate


STATS_CACHE_S = 1.0


def cached_stats() -> dict[str, Any]:
    """The dashboard's figures, computed at most once a second per web process: many open dashboards
    share them, and the page and the request its script sends right after it are one computation."""
    stats = cache.get("steadyflow:dashboard-stats")
    if stats is None:
        stats = compute_stats()
        cache.set("steadyflow:dashboard-stats", stats, STATS_CACHE_S)
    return stats



def compute_stats(now: datetime | None = None) -> dict[str, Any]:
    now = now or clock.now()
    # The planner's generated plan instances are its step's work, not runs of their own: one planned run
    # counts once (the plan's instance is linked from its parent's step).
    counts = dict(WorkflowInstance.objects.exclude(plans.generated("version__definition__")).order_by()
                  .values_list("status").annotate(n=Count("id")))
    return {
        "at": now.isoformat(),
        "counts": {status.value: counts.get(status.value, 0) for status in InstanceStatus},
        "steps": _cached_series(now),
        "reviews": open_reviews(),
        "breakers": breakers(now),
        "queues": queues(),
        "failures": recent_failures(),
    }


def _cached_series(now: datetime) -> dict[str, Any]:
    series = cache.get("steadyflow:dashboard-series")
    if series is None:
        series = step_series(now)
        cache.set("steadyflow:dashboard-series", series, SERIES_CACHE_S)
    return series


def _percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (PostgreSQL's percentile_cont)."""
    if not values:
        return None
    position = (len(values) - 1) * q
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def step_series(now: datetime, minutes: int = 60) -> dict[str, Any]:
    """Steps finished per minute over the last hour, with p50/p95 run time (started -> finished),
    per minute and over the hour. Structural nodes (start, end) take no time and waiting nodes (timer,
    human task, sub-workflow, planner) do no work: both are left out.

    On PostgreSQL one query with exact percentiles; date_part (a double) rather than EXTRACT (a
    numeric since PostgreSQL 14) keeps it ~10x cheaper: ~70 ms for 200,000 steps in the hour."""
    since = (now - timedelta(minutes=minutes)).replace(second=0, microsecond=0) + timedelta(minutes=1)
    # Left out: steps that take no time (start, end) and steps whose started -> finished is waiting, not
    # work (a timer, a human task, a child instance): a person's four minutes are no step's run time.
    structural = unmeasured_kinds()
    done = [StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.COMPENSATED]
    rows: list[tuple[int | None, int, int, float | None, float | None]]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                """
                SELECT floor(date_part('epoch', finished_at) / 60)::bigint AS minute,
                       count(*) FILTER (WHERE status <> 'failed'), count(*) FILTER (WHERE status = 'failed'),
                       percentile_cont(0.5) WITHIN GROUP (ORDER BY date_part('epoch', finished_at - started_at)),
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY date_part('epoch', finished_at - started_at))
                FROM workflows_steprun
                WHERE finished_at >= %s AND started_at IS NOT NULL AND status = ANY(%s)
                      AND NOT (node_type = ANY(%s))
                GROUP BY GROUPING SETS ((1), ())
                """,
                [since, done, structural],
            )
            rows = [(m, ok, failed, p50, p95) for m, ok, failed, p50, p95 in cursor.fetchall()]
    else:
        by_minute: dict[int, list[tuple[float, bool]]] = {}
        # Unordered: with the model's ordering by id, SQLite's planner scanned the whole step table in id
        # order rather than search step_finished (the rows are bucketed by minute anyway).
        for finished, started, status in (StepRun.objects.filter(finished_at__gte=since, started_at__isnull=False,
                                                                 status__in=done)
                                          .exclude(node_type__in=structural).order_by()
                                          .values_list("finished_at", "started_at", "status").iterator()):
            by_minute.setdefault(int(finished.timestamp() // 60), []).append(
                ((finished - started).total_seconds(), status == StepStatus.FAILED))
        rows = []
        everything: list[float] = []
        ok_total = failed_total = 0
        for minute, items in by_minute.items():
            durations = sorted(d for d, _ in items)
            everything.extend(durations)
            failed = sum(1 for _, f in items if f)
            ok_total += len(items) - failed
            failed_total += failed
            rows.append((minute, len(items) - failed, failed, _percentile(durations, 0.5),
                         _percentile(durations, 0.95)))
        everything.sort()
        rows.append((None, ok_total, failed_total, _percentile(everything, 0.5), _percentile(everything, 0.95)))

    first_minute = int(since.timestamp() // 60)
    slots: dict[int, dict[str, Any]] = {
        first_minute + i: {"t": datetime.fromtimestamp((first_minute + i) * 60, tz=UTC).isoformat(),
                           "ok": 0, "failed": 0, "p50_ms": None, "p95_ms": None}
        for i in range(minutes)
    }
    hour: dict[str, Any] = {"ok": 0, "failed": 0, "p50_ms": None, "p95_ms": None}

    def ms(value: Any) -> float | None:
        return round(float(value) * 1000, 1) if value is not None else None

    for at_minute, n_ok, n_failed, p50, p95 in rows:
        target = hour if at_minute is None else slots.get(int(at_minute))
        if target is not None:
            target.update(ok=int(n_ok), failed=int(n_failed), p50_ms=ms(p50), p95_ms=ms(p95))
    hour["per_minute"] = round((hour["ok"] + hour["failed"]) / minutes, 2)
    return {"minutes": list(slots.values()), "hour": hour}


def open_reviews(limit: int = 8) -> dict[str, Any]:
    items = ReviewItem.objects.filter(status=ReviewStatus.OPEN)
    by_reason = dict(items.order_by().values_list("reason").annotate(n=Count("id")))
    latest = items.select_related("instance__version__definition").order_by("-created_at")[:limit]
    return {
        "open": sum(by_reason.values()),
        "by_reason": by_reason,
        "latest": [{"id": item.pk, "instance": item.instance_id, "reason": item.reason, "node": item.node_id,
                    "workflow": item.instance.version.definition.slug, "created_at": _iso(item.created_at),
                    "message": (item.details or {}).get("message") or (item.details or {}).get("prompt", "")}
                   for item in latest],
    }


def queues() -> dict[str, Any]:
    """Depth, running jobs and workers per RQ queue. Redis being down must not break the page.

    Two Redis round trips for every figure (a pipeline of counts and worker sets, then one of the
    workers' states), not one per queue, registry and worker: on a loaded machine the ~50 round trips
    were most of the dashboard's time. Registries are counted as they stand (ZCARD): their clean-up is the
    workers' maintenance, not a page view's."""
    import django_rq
    from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry
    from rq.worker_registration import WORKERS_BY_QUEUE_KEY

    result: dict[str, Any] = {"queues": [], "error": None}
    try:
        # A kind's figures cover its queues of every priority (engine/priorities.py); its workers
        # listen on all of them and register under the kind's own queue name.
        kinds = {name: [django_rq.get_queue(queue_name) for queue_name in queue_names(name)] for name in QUEUES}
        conn = django_rq.get_queue(QUEUES[0]).connection
        pipe = conn.pipeline(transaction=False)
        for kind_queues in kinds.values():
            for queue in kind_queues:
                pipe.llen(queue.key)
                for registry in (StartedJobRegistry, ScheduledJobRegistry, FailedJobRegistry):
                    pipe.zcard(registry(queue=queue).key)
        for name in kinds:
            pipe.smembers(WORKERS_BY_QUEUE_KEY % name)
        answers = iter(pipe.execute())
        figures = {name: [[next(answers) for _ in range(4)] for _ in kind_queues]
                   for name, kind_queues in kinds.items()}
        worker_keys = {name: sorted(k.decode() if isinstance(k, bytes) else str(k) for k in next(answers))
                       for name in kinds}
        state_pipe = conn.pipeline(transaction=False)
        for keys in worker_keys.values():
            for key in keys:
                state_pipe.hget(key, "state")
        states = iter(state_pipe.execute())
        for name, rows in figures.items():
            # A registered worker whose hash is gone died without deregistering: not counted (Worker.all).
            alive = [state for state in (next(states) for _ in worker_keys[name]) if state is not None]
            result["queues"].append({
                "name": name,
                "queued": sum(int(row[0]) for row in rows),
                "running": sum(int(row[1]) for row in rows),
                "scheduled": sum(int(row[2]) for row in rows),
                "failed_jobs": sum(int(row[3]) for row in rows),
                "workers": len(alive),
                "busy_workers": sum(1 for state in alive if (state.decode() if isinstance(state, bytes) else state)
                                    == "busy"),
            })
    except Exception as exc:  # noqa: BLE001 - Redis unreachable: say so on the page
        log.warning("dashboard: queue figures unavailable: %s", exc)
        result["error"] = f"queue figures unavailable: {exc}"
        result["queues"] = []
    return result


def recent_failures(limit: int = 10) -> list[dict[str, Any]]:
    failed = (WorkflowInstance.objects.filter(status__in=(InstanceStatus.FAILED, InstanceStatus.COMPENSATED,
                                                          InstanceStatus.COMPENSATING))
              .select_related("version__definition").order_by("-id")[:limit])
    return [{"id": inst.pk, "workflow": inst.version.definition.slug, "status": inst.status,
             "reason": inst.halt_reason, "node": (inst.error or {}).get("node"),
             "message": (inst.error or {}).get("message", ""), "finished_at": _iso(inst.finished_at)}
            for inst in failed]
