"""GET /api/dashboard/daily: the daily chart's figures, per UTC day (by the day each instance finished),
for every workflow or one (`?workflow=SLUG`), over the last `?days=` days (default 30, at most 366).

Days whose history retention has deleted come from the daily rollup (workflows/retention/rollup.py);
the others are computed from the history with the same code, so a day's figures do not change when its
history goes."""

from __future__ import annotations

from django.core.cache import cache
from django.http import HttpRequest, JsonResponse
from django.utils import timezone

from dashboard.api.core import api_view, error
from dashboard.security import permissions
from workflows.models import WorkflowDefinition
from workflows.retention import rollup

MAX_DAYS = 366
CACHE_S = 30.0  # today's figures are computed from the history: many open dashboards share them


@api_view(("GET",), perm=permissions.VIEW_INSTANCES)
def daily(request: HttpRequest) -> JsonResponse:
    raw_days = request.GET.get("days", "30")
    try:
        days = int(raw_days)
    except ValueError:
        return error(400, f"days must be a whole number of days, not {raw_days!r}")
    if not 1 <= days <= MAX_DAYS:
        return error(400, f"days must be between 1 and {MAX_DAYS}, not {days}")
    slug = request.GET.get("workflow") or None
    definition_id = None
    if slug is not None:
        definition_id = WorkflowDefinition.objects.filter(slug=slug).values_list("pk", flat=True).first()
        if definition_id is None:
            return error(404, f"no workflow with slug {slug!r}")
    key = f"steadyflow:dashboard-daily:{days}:{definition_id or ''}"
    body = cache.get(key)
    if body is None:
        now = timezone.now()
        last = rollup.rolled_through()
        body = {"at": now.isoformat(), "workflow": slug, "rolled_up_through": last.isoformat() if last else None,
                "days": rollup.daily_series(now, days, definition_id)}
        cache.set(key, body, CACHE_S)
    return JsonResponse(body)
