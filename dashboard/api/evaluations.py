"""JSON endpoints for evaluations (workflows/evaluations/): datasets (list, import JSONL, export JSONL),
evaluations (start, list, read), and the comparison of two. Reading needs the view permission of graphs;
importing and starting, the designers' (dashboard/security/permissions.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404

from dashboard.api.core import api_view, error
from dashboard.api.http import object_body
from dashboard.security import permissions
from workflows.evaluations import datasets, runner
from workflows.evaluations.models import Dataset, Evaluation
from workflows.models import WorkflowDefinition

READ = permissions.VIEW_GRAPHS
WRITE = (permissions.VIEW_GRAPHS, permissions.SAVE_VERSION)


def evaluation_json(evaluation: Evaluation, results: bool = False) -> dict[str, Any]:
    shape: dict[str, Any] = {
        "id": evaluation.pk, "workflow": evaluation.dataset.definition.slug, "dataset": evaluation.dataset.name,
        "version": evaluation.version.number, "status": evaluation.status, "concurrency": evaluation.concurrency,
        "summary": evaluation.summary, "created_at": evaluation.created_at.isoformat(),
        "finished_at": evaluation.finished_at.isoformat() if evaluation.finished_at else None}
    if results:
        shape["results"] = [
            {"row": r.row.number, "label": r.row.label, "input": r.row.input, "status": r.status,
             "output": r.output, "checks": r.checks, "cost_usd": str(r.cost_usd), "tokens": r.tokens,
             "latency_ms": r.latency_ms, "instance": r.instance_id}
            for r in evaluation.results.select_related("row").order_by("row__number")]
    return shape


def _writable_body(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    """A designer's JSON object, or the error answer (403 for readers, 4xx for a bad body)."""
    refused = permissions.refusal(request.user, *WRITE)
    if refused is not None:
        return error(403, refused)
    return object_body(request)


@api_view(("GET", "POST"), perm=READ)
def dataset_list(request: HttpRequest, slug: str) -> JsonResponse:
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    if request.method == "POST":
        body = _writable_body(request)
        if isinstance(body, JsonResponse):
            return body
        if not isinstance(body.get("name"), str) or not isinstance(body.get("jsonl"), str):
            return error(400, "send {\"name\": \"...\", \"jsonl\": \"one row a line\"}")
        try:
            dataset = datasets.save(definition, body["name"], body["jsonl"], user=request.user,
                                    description=str(body.get("description") or "")[:300])
        except datasets.DatasetInvalid as exc:
            return error(400, str(exc))
        return JsonResponse({"name": dataset.name, "rows": dataset.rows.count()}, status=201)
    rows = definition.datasets.order_by("name")
    return JsonResponse({"datasets": [{"name": d.name, "description": d.description, "rows": d.rows.count()}
                                      for d in rows]})


@api_view(("GET",), perm=READ)
def dataset_export(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    dataset = get_object_or_404(Dataset, definition__slug=slug, name=name)
    return HttpResponse(datasets.export(dataset), content_type="application/x-ndjson")


@api_view(("GET", "POST"), perm=READ)
def evaluation_list(request: HttpRequest, slug: str) -> JsonResponse:
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    if request.method == "POST":
        body = _writable_body(request)
        if isinstance(body, JsonResponse):
            return body
        dataset = definition.datasets.filter(name=body.get("dataset")).first()
        if dataset is None:
            return error(400, f"workflow {slug!r} has no dataset {body.get('dataset')!r}")
        number = body.get("version")
        versions = definition.versions.order_by("-number")
        version = versions.filter(number=number).first() if isinstance(number, int) else versions.first()
        if version is None:
            return error(400, f"workflow {slug!r} has no version {number!r}")
        concurrency = body.get("concurrency", 4)
        if not isinstance(concurrency, int) or not 1 <= concurrency <= runner.MAX_CONCURRENCY:
            return error(400, f"concurrency must be an integer from 1 to {runner.MAX_CONCURRENCY}")
        evaluation = runner.start(dataset, version, user=request.user, concurrency=concurrency)
        return JsonResponse(evaluation_json(evaluation), status=201)
    rows = Evaluation.objects.filter(dataset__definition=definition).select_related("dataset", "version")[:100]
    return JsonResponse({"evaluations": [evaluation_json(e) for e in rows]})


@api_view(("GET",), perm=READ)
def evaluation_detail(request: HttpRequest, evaluation_id: int) -> JsonResponse:
    evaluation = get_object_or_404(Evaluation.objects.select_related("dataset__definition", "version"),
                                   pk=evaluation_id)
    return JsonResponse(evaluation_json(evaluation, results=True))


@api_view(("GET",), perm=READ)
def evaluation_compare(request: HttpRequest, evaluation_id: int, other_id: int) -> JsonResponse:
    base = get_object_or_404(Evaluation, pk=evaluation_id)
    other = get_object_or_404(Evaluation, pk=other_id)
    try:
        return JsonResponse(runner.compare(base, other))
    except ValueError as exc:
        return error(400, str(exc))
