"""The Evaluations pages: a workflow's datasets and evaluations (import a JSONL dataset, evaluate a version),
one evaluation's table (per row: output, pass/fail, cost, latency), and two evaluations side by side.
Server-rendered forms; the API (dashboard/api/evaluations.py) serves the same."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from dashboard.security import permissions
from dashboard.security.permissions import authorize
from workflows.evaluations import datasets, runner
from workflows.evaluations.models import Evaluation, EvaluationStatus
from workflows.models import WorkflowDefinition

WRITE = (permissions.VIEW_GRAPHS, permissions.SAVE_VERSION)


@authorize(permissions.VIEW_GRAPHS)
def evaluations_page(request: HttpRequest, slug: str) -> HttpResponse:
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    if request.method == "POST":
        refused = permissions.refusal(request.user, *WRITE)
        if refused is not None:
            raise PermissionDenied(refused)
        if request.POST.get("form") == "dataset":
            upload = request.FILES.get("file")
            text = upload.read().decode("utf-8", errors="replace") if upload else request.POST.get("jsonl", "")
            try:
                dataset = datasets.save(definition, request.POST.get("name", "").strip(), text, user=request.user)
            except datasets.DatasetInvalid as exc:
                messages.error(request, f"Dataset not saved: {exc}")
            else:
                messages.success(request, f"Dataset {dataset.name}: {dataset.rows.count()} row(s)")
            return redirect("evaluations", slug=slug)
        dataset = definition.datasets.filter(name=request.POST.get("dataset")).first()
        version = definition.versions.filter(number=request.POST.get("version") or 0).first()
        if dataset is None or version is None:
            messages.error(request, "Choose a dataset and a version")
            return redirect("evaluations", slug=slug)
        evaluation = runner.start(dataset, version, user=request.user,
                                  concurrency=int(request.POST.get("concurrency") or 4))
        return redirect("evaluation", evaluation_id=evaluation.pk)
    evaluations = (Evaluation.objects.filter(dataset__definition=definition)
                   .select_related("dataset", "version").order_by("-created_at")[:50])
    return render(request, "dashboard/evaluations.html", {
        "definition": definition, "datasets": definition.datasets.order_by("name"),
        "versions": definition.versions.order_by("-number"), "evaluations": evaluations,
        "can_write": permissions.refusal(request.user, *WRITE) is None})


@authorize(permissions.VIEW_GRAPHS)
def evaluation_page(request: HttpRequest, evaluation_id: int) -> HttpResponse:
    evaluation = get_object_or_404(Evaluation.objects.select_related("dataset__definition", "version"),
                                   pk=evaluation_id)
    comparison = None
    other_id = request.GET.get("compare")
    if other_id and other_id.isdigit():
        base = Evaluation.objects.filter(pk=int(other_id), dataset=evaluation.dataset).first()
        if base is None:
            messages.error(request, f"Evaluation {other_id} is not of the same dataset")
        else:
            comparison = runner.compare(base, evaluation)
    siblings = (Evaluation.objects.filter(dataset=evaluation.dataset, status=EvaluationStatus.FINISHED)
                .exclude(pk=evaluation.pk).select_related("version").order_by("-created_at")[:20])
    return render(request, "dashboard/evaluation.html", {
        "evaluation": evaluation, "definition": evaluation.dataset.definition,
        "results": evaluation.results.select_related("row").order_by("row__number"),
        "running": evaluation.status == EvaluationStatus.RUNNING, "comparison": comparison, "siblings": siblings})
