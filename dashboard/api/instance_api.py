"""JSON endpoints behind the instance page and the dashboard: the step runs of an instance (the step
inspector), operators' actions (cancel, retry a failed step, rerun from a node, review decisions),
and the dashboard's figures."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from django.db.models import Q, TextField
from django.db.models.functions import Cast, Coalesce, Length
from django.http import HttpRequest, JsonResponse
from django.urls import reverse

from dashboard.api.http import api_view, error, object_body
from dashboard.api.shapes import instance_json, step_json
from dashboard.api.stats import cached_stats
from dashboard.security import permissions
from workflows.models import ReviewItem, ReviewStatus, StepRun, WorkflowInstance
from workflows.operators import operations
from workflows.runtime import child_kinds

log = logging.getLogger("steadyflow.dashboard")

VIEW = permissions.VIEW_INSTANCES
OPERATE = permissions.OPERATE
MAX_STEPS = 1000
# What one step list holds of inputs and outputs at most (bytes of their JSON text): a list of huge
# outputs is answered without loading them all (the rest are fetched per node).
STEP_LIST_BYTES = 4_000_000


def _instance_or_404(instance_id: int) -> WorkflowInstance | None:
    return WorkflowInstance.objects.select_related("version__definition").filter(pk=instance_id).first()


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
