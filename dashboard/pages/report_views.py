"""The run report of an instance (workflows/operators/report.py builds it): JSON at /api/instances/<id>/report
(?download=1 for a file), and a page at /instances/<id>/report/."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import F
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from dashboard.api.http import api_view, error
from dashboard.security import permissions
from dashboard.security.permissions import authorize
from workflows.models import AuditEntry, ReviewItem, StepRun, WorkflowInstance
from workflows.operators.report import build_report

STEP_FIELDS = ("id", "node_id", "node_type", "visit", "attempt", "status", "worker", "created_at", "started_at",
               "finished_at", "usage", "error", "degraded")
# Of a step's output the report reads two keys only: those are selected (never the whole output, up to
# MAX_PAYLOAD_BYTES per step), and the rows are streamed from the database in chunks.
OUTPUT_KEYS = {"output_tool_calls": "output__tool_calls", "output_cache": "output__cache"}
CHUNK = 500
# The steps a report lists, and sums per node (an instance may run up to MAX_TRANSITIONS steps): past
# this the report says `truncated` and its per-node figures cover the first MAX_REPORT_STEPS; the
# instance's token and cost totals stay exact (they come from its own counters).
MAX_REPORT_STEPS = 10_000


def report_for(instance: WorkflowInstance) -> dict[str, Any]:
    """Load the rows of one instance and build its report."""
    rows = StepRun.objects.filter(instance=instance)
    picked = rows.order_by("id").values(*STEP_FIELDS, **{k: F(v) for k, v in OUTPUT_KEYS.items()})
    steps = [_slim(row) for row in picked[:MAX_REPORT_STEPS].iterator(chunk_size=CHUNK)]
    total = rows.count() if len(steps) == MAX_REPORT_STEPS else len(steps)
    reviews = list(ReviewItem.objects.filter(instance=instance).annotate(decided_by_name=F("decided_by__username"))
                   .values("id", "node_id", "reason", "status", "details", "decision", "created_at", "decided_at",
                           "decided_by_name", "note"))
    for review in reviews:
        review["decided_by"] = review.pop("decided_by_name")
    audit = list(AuditEntry.objects.filter(instance=instance).annotate(actor_name=F("actor__username"))
                 .values("id", "action", "created_at", "actor_name", "review_id", "note"))
    for entry in audit:
        entry["actor"] = entry.pop("actor_name")
    row = {"id": instance.pk, "workflow": instance.version.definition.slug, "version": instance.version.number,
           "status": instance.status, "halt_reason": instance.halt_reason, "created_at": instance.created_at,
           "finished_at": instance.finished_at, "trace_id": instance.trace_id, "tokens": instance.tokens,
           "cost_usd": instance.cost_usd}
    return build_report(row, steps, reviews, audit, steps_total=total)


def _slim(row: dict[str, Any]) -> dict[str, Any]:
    """A step row as the report reads it: its output reduced to the tool calls' count and the cache info."""
    calls, cache = row.pop("output_tool_calls", None), row.pop("output_cache", None)
    row["output"] = {"tool_calls": [None] * len(calls) if isinstance(calls, list) else None, "cache": cache}
    return row


def _instance(instance_id: int) -> WorkflowInstance | None:
    return WorkflowInstance.objects.select_related("version__definition").filter(pk=instance_id).first()


@api_view(("GET",), perm=permissions.VIEW_INSTANCES)
def instance_report(request: HttpRequest, instance_id: int) -> HttpResponse:
    """The report as JSON; `?download=1` as an attachment (instance-<id>-report.json)."""
    inst = _instance(instance_id)
    if inst is None:
        return error(404, f"instance {instance_id} does not exist")
    report = report_for(inst)
    if request.GET.get("download") not in (None, "", "0"):
        body = json.dumps(report, cls=DjangoJSONEncoder, indent=2)
        response = HttpResponse(body, content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="instance-{inst.pk}-report.json"'
        return response
    return JsonResponse(report)


@authorize(permissions.VIEW_INSTANCES)
def report_page(request: HttpRequest, instance_id: int) -> HttpResponse:
    inst = get_object_or_404(WorkflowInstance.objects.select_related("version__definition"), pk=instance_id)
    return render(request, "dashboard/report.html", {"instance": inst, "report": report_for(inst)})
