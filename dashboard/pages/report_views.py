"""The run report of an instance (workflows/operators/report.py builds it): JSON at /api/instances/<id>/report
(?download=1 for a file), and a page at /instances/<id>/report/."""

from __future__ import annotations

import json

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from dashboard.api.http import api_view, error
from dashboard.api.shapes import report_for
from dashboard.security import permissions
from dashboard.security.permissions import authorize
from workflows.models import WorkflowInstance


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
