"""JSON endpoints behind the instance page and the dashboard: the step runs of an instance (the step
inspector), operators' actions (cancel, retry a failed step, rerun from a node, review decisions),
and the dashboard's figures."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Q, TextField
from django.db.models.functions import Cast, Coalesce, Length
from django.http import HttpRequest, JsonResponse
from django.urls import reverse

from dashboard.api.core import instance_json
from dashboard.api.http import api_view, error, object_body
from dashboard.security import permissions
from workflows import clock
from workflows.authoring import plans
from workflows.engine import breaker as breaker_logic
from workflows.engine.nodes import known_kinds
from workflows.engine.priorities import queue_names
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.engine.usage import has_split, step_tokens
from workflows.models import BreakerState, ReviewItem, ReviewStatus, StepRun, WorkflowInstance
from workflows.operators import operations
from workflows.runtime.subflows import child_kinds

log = logging.getLogger("steadyflow.dashboard")

VIEW = permissions.VIEW_INSTANCES
OPERATE = permissions.OPERATE
QUEUES = ("ai", "io", "default")
STATS_CACHE_S = 1.0
SERIES_CACHE_S = 5.0  # the per-minute chart: the one figure whose cost grows with the step rate
MAX_STEPS = 1000
# What one step list holds of inputs and outputs at most (bytes of their JSON text): a list of huge
# outputs is answered without loading them all (the rest are fetched per node).
STEP_LIST_BYTES = 4_000_000


def _instance_or_404(instance_id: int) -> WorkflowInstance | None:
    return WorkflowInstance.objects.select_related("version__definition").filter(pk=instance_id).first()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def step_json(step: StepRun, child: dict[str, Any] | None = None) -> dict[str, Any]:
    usage = step.usage or {}
    duration = step.duration_s
    return {
        "id": step.pk,
        "node": step.node_id,
        "type": step.node_type,
        "visit": step.visit,
        "attempt": step.attempt,
        "status": step.status,
        "queue": step.queue,
        "worker": step.worker,
        "created_at": _iso(step.created_at),
        "started_at": _iso(step.started_at),
        "finished_at": _iso(step.finished_at),
        "due_at": _iso(step.due_at),
        "duration_ms": round(duration * 1000, 2) if duration is not None else None,
        "input": step.input,
        "output": step.output,
        "error": step.error,
        "usage": step.usage,
        # One rule with the run report and the instance's total (engine/usage.py); the inspector shows the
        # in/out split only where the usage has one (an llm step, not a sub-workflow's or planner's total).
        "tokens": step_tokens(usage),
        "tokens_split": has_split(usage),
        "cost_usd": float(usage.get("cost_usd", 0) or 0),
        "idempotency_key": step.idempotency_key,
        "degraded": step.degraded,
        **({"child": child} if child is not None else {}),
    }


def child_links(steps: list[StepRun]) -> dict[int, dict[str, Any]]:
    """The latest child instance of each subworkflow (or planner) step (the inspector links to it), with the open
    review items that halt it: a child's halt shows on its parent's page."""
    kinds = child_kinds()
    ids = [s.pk for s in steps if s.node_type in kinds]
    if not ids:
        return {}
    latest: dict[int, WorkflowInstance] = {}
    counts: dict[int, int] = {}
    for child in (WorkflowInstance.objects.filter(parent_step_id__in=ids).select_related("version__definition")
                  .order_by("id")):
        assert child.parent_step_id is not None
        latest[child.parent_step_id] = child
        counts[child.parent_step_id] = counts.get(child.parent_step_id, 0) + 1
    reviews: dict[int, list[dict[str, Any]]] = {}
    for item in ReviewItem.objects.filter(instance_id__in=[c.pk for c in latest.values()],
                                          status=ReviewStatus.OPEN).order_by("id"):
        reviews.setdefault(item.instance_id, []).append(
            {"id": item.pk, "reason": item.reason, "url": reverse("review-detail", args=[item.pk])})
    planners = {s.pk for s in steps if s.node_type == "planner"}
    return {step_id: {"id": c.pk, "url": reverse("instance", args=[c.pk]), "status": c.status,
                      "workflow": c.version.definition.slug, "version": c.version.number,
                      "children": counts[step_id], "reviews": reviews.get(c.pk, []),
                      # A planner's child runs the plan it recorded: the editor shows it read-only.
                      **({"plan_url": reverse("workflow-editor", args=[c.version.definition.slug])
                          + f"?version={c.version.number}"} if step_id in planners else {})}
            for step_id, c in latest.items()}


@api_view(("GET",), perm=VIEW)
def instance_steps(request: HttpRequest, instance_id: int) -> JsonResponse:
    """Every run of an instance's steps (or of one node, with ?node=), oldest first."""
    inst = _instance_or_404(instance_id)
    if inst is None:
        return error(404, f"instance {instance_id} does not exist")
    steps = StepRun.objects.filter(instance=inst).order_by("id")
    node = request.GET.get("node")
    if node:
        # The node's own runs, its compensations, and the tool calls of an llm node (runtime/tool_calls.py).
        steps = steps.filter(Q(node_id__in=(node, f"compensate:{node}")) | Q(node_id__startswith=f"tool:{node}:"))
    # Bounded memory: the big columns' sizes are read first, and the inputs and outputs are loaded only
    # while the answer stays within STEP_LIST_BYTES; later ones say how to fetch them (one node's runs).
    size_of = [Coalesce(Length(Cast(column, TextField())), 0) for column in ("input", "output")]
    sized = list(steps.annotate(payload_bytes=size_of[0] + size_of[1])
                 .values_list("pk", "payload_bytes")[:MAX_STEPS + 1])
    budget = STEP_LIST_BYTES
    loaded: set[int] = set()
    for pk, size in sized[:MAX_STEPS]:
        # One node's runs (what a truncated entry points at) always show the first, however big.
        if (size or 0) <= budget or (node and not loaded):
            budget -= size or 0
            loaded.add(pk)
    ids = [pk for pk, _ in sized[:MAX_STEPS]]
    rows = sorted([*StepRun.objects.filter(pk__in=[pk for pk in ids if pk in loaded]),
                   *StepRun.objects.filter(pk__in=[pk for pk in ids if pk not in loaded]).defer("input", "output")],
                  key=lambda step: step.pk)
    children = child_links(rows)
    shown = []
    for step in rows:
        if step.pk not in loaded:
            later = {"truncated": True,
                     "fetch": f"/api/instances/{inst.pk}/steps?{urlencode({'node': step.node_id})}"}
            step.input, step.output = later, later  # set, not loaded: the deferred columns stay unread
        shown.append(step_json(step, children.get(step.pk)))
    return JsonResponse({"steps": shown, "truncated": len(sized) > MAX_STEPS,
                         "payloads_truncated": len(loaded) < len(rows)})


def _operation(request: HttpRequest, instance_id: int, run: Any) -> JsonResponse:
    if _instance_or_404(instance_id) is None:
        return error(404, f"instance {instance_id} does not exist")
    body = object_body(request)
    if isinstance(body, JsonResponse):
        return body
    try:
        extra = run(body)
    except operations.OperationError as exc:
        return error(exc.status, exc.message)
    inst = _instance_or_404(instance_id)
    assert inst is not None
    return JsonResponse({"instance": instance_json(inst), **(extra or {})})


@api_view(("POST",), perm=VIEW)
def cancel(request: HttpRequest, instance_id: int) -> JsonResponse:
    """Operators cancel any instance, designers the ones they started (operations.cancel_refusal)."""
    inst = _instance_or_404(instance_id)
    if inst is None:
        return error(404, f"instance {instance_id} does not exist")
    refused = operations.cancel_refusal(request.user, inst)
    if refused is not None:
        return error(403, refused)

    def run(body: dict[str, Any]) -> None:
        operations.cancel(instance_id, request.user, note=str(body.get("note", "")))

    return _operation(request, instance_id, run)


@api_view(("POST",), perm=(VIEW, OPERATE))
def retry(request: HttpRequest, instance_id: int) -> JsonResponse:
    def run(body: dict[str, Any]) -> dict[str, Any]:
        step_id = body.get("step")
        if step_id is not None and not isinstance(step_id, int):
            raise operations.OperationError("'step' must be a step id (an integer)", status=400)
        step = operations.retry_failed_step(instance_id, request.user, step_id=step_id,
                                            note=str(body.get("note", "")))
        return {"step": step_json(step)}

    return _operation(request, instance_id, run)


@api_view(("POST",), perm=(VIEW, OPERATE))
def rerun(request: HttpRequest, instance_id: int) -> JsonResponse:
    def run(body: dict[str, Any]) -> dict[str, Any]:
        node = body.get("node")
        if not isinstance(node, str) or not node:
            raise operations.OperationError("'node' (the node to rerun from) is required", status=400)
        step = operations.rerun_from_node(instance_id, node, request.user, note=str(body.get("note", "")))
        return {"step": step_json(step)}

    return _operation(request, instance_id, run)


@api_view(("POST",), perm=(VIEW, permissions.DECIDE))
def review_decide(request: HttpRequest, instance_id: int) -> JsonResponse:
    """Decide the instance's open review item (approve, retry, reroute, edit_context, reject, cancel).
    A human task for a group the user is not in is refused with a 403 naming it (review.refusal)."""
    from workflows.operators import review

    inst = _instance_or_404(instance_id)
    if inst is None:
        return error(404, f"instance {instance_id} does not exist")
    body = object_body(request)
    if isinstance(body, JsonResponse):
        return body
    items = ReviewItem.objects.filter(instance=inst, status=ReviewStatus.OPEN)
    if body.get("item") is not None:
        items = items.filter(pk=body["item"]) if isinstance(body["item"], int) else items.none()
    item = items.order_by("-created_at").first()
    if item is None:
        return error(409, f"instance {instance_id} has no open review item"
                     + (f" with id {body['item']}" if body.get("item") is not None else ""))
    fields = ("extra_transitions", "extra_budget_usd", "extra_tokens", "context", "goto")
    try:
        decision = review.Decision(action=str(body.get("action", "")), note=str(body.get("note", "")),
                                   inputs=body.get("inputs") or {}, **{k: body.get(k) for k in fields})
        review.decide(item.pk, request.user, decision)
    except review.ReviewForbidden as exc:
        return error(403, str(exc))
    except review.ReviewConflict as exc:
        return error(409, str(exc))
    except (review.ReviewError, ValueError, TypeError) as exc:
        return error(400, str(exc))
    except operations.OperationError as exc:  # pragma: no cover - defensive, decide raises ReviewError
        return error(exc.status, exc.message)
    inst.refresh_from_db()
    return JsonResponse({"instance": instance_json(inst), "review": item.pk})


# --- Dashboard ----------------------------------------------------------------------------------

@api_view(("GET",), perm=VIEW)
def dashboard_stats(request: HttpRequest) -> JsonResponse:
    return JsonResponse(cached_stats())


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
    structural = [name for name, kind in known_kinds().items()
                  if kind.structural or kind.awaits_person or kind.starts_children or not kind.measured]
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
        for finished, started, status in (StepRun.objects.filter(finished_at__gte=since, started_at__isnull=False,
                                                                 status__in=done)
                                          .exclude(node_type__in=structural)
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


def breakers(now: datetime) -> list[dict[str, Any]]:
    from workflows.adapters.breakers import breaker_config

    config = breaker_config()
    result = []
    for row in BreakerState.objects.order_by("key"):
        state = breaker_logic.Breaker(state=row.state, buckets=row.buckets or {}, opened_at=row.opened_at,
                                      trial_started_at=row.trial_started_at)
        calls, failures = state.counts(now.timestamp(), config)
        cooldown_left = None
        if row.state == breaker_logic.OPEN and row.opened_at is not None:
            cooldown_left = max(0.0, round(row.opened_at + config.cooldown_s - now.timestamp(), 1))
        result.append({"key": row.key, "state": row.state, "calls": calls, "failures": failures,
                       "opened_at": (datetime.fromtimestamp(row.opened_at, tz=UTC).isoformat()
                                     if row.opened_at else None),
                       "cooldown_left_s": cooldown_left, "updated_at": _iso(row.updated_at)})
    return result


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
