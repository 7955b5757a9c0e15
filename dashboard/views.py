"""Server-rendered pages."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from workflows.models import StepRun, WorkflowDefinition, WorkflowInstance


def _get_instance_for_user(request: HttpRequest, instance_id: int) -> WorkflowInstance:
    # Every authenticated user may view instances for now; per-workflow permissions come with
    # the review-queue groups (viewers, designers, operators).
    return get_object_or_404(WorkflowInstance.objects.select_related("version__definition"), pk=instance_id)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    definitions = WorkflowDefinition.objects.filter(archived=False).annotate(n_versions=Count("versions"))
    instances = WorkflowInstance.objects.select_related("version__definition")[:50]
    counts = dict(WorkflowInstance.objects.values_list("status").annotate(n=Count("id")).order_by())
    return render(request, "dashboard/home.html",
                  {"definitions": definitions, "instances": instances, "counts": counts})


@login_required
def definition_detail(request: HttpRequest, slug: str) -> HttpResponse:
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    versions = definition.versions.all()
    instances = WorkflowInstance.objects.filter(version__definition=definition)[:50]
    return render(request, "dashboard/definition.html",
                  {"definition": definition, "versions": versions, "instances": instances})


@login_required
def instance_detail(request: HttpRequest, instance_id: int) -> HttpResponse:
    instance = _get_instance_for_user(request, instance_id)
    steps = StepRun.objects.filter(instance=instance).order_by("id")
    events = instance.events.order_by("seq")[:500]
    return render(request, "dashboard/instance.html", {"instance": instance, "steps": steps, "events": events})


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})
