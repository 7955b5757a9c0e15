"""The JSON API. Errors are JSON objects with a `message` (and `errors` for invalid graphs)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404

from workflows import executor
from workflows.engine.errors import GraphInvalid, PayloadTooLarge
from workflows.engine.nodes import known_kinds
from workflows.engine.validation import validate_graph
from workflows.models import WorkflowDefinition, WorkflowInstance

View = Callable[..., JsonResponse]


def error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"message": message, **extra}, status=status)


def api_view(methods: tuple[str, ...], perm: str | None = None) -> Callable[[View], View]:
    """Login and permission checks that answer JSON (401/403) instead of redirecting to a page."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
            if not request.user.is_authenticated:
                return error(401, "authentication required")
            if request.method not in methods:
                return error(405, f"method {request.method} not allowed (use {', '.join(methods)})")
            if perm and not request.user.has_perm(perm):
                return error(403, f"permission denied: you need {perm}")
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


def _json_body(request: HttpRequest) -> Any:
    if not request.body:
        return {}
    try:
        return json.loads(request.body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"request body is not valid JSON: {exc}") from None


def _get_definition_for_user(request: HttpRequest, slug: str) -> WorkflowDefinition:
    return get_object_or_404(WorkflowDefinition, slug=slug, archived=False)


def _get_instance_for_user(request: HttpRequest, instance_id: int) -> WorkflowInstance:
    return get_object_or_404(WorkflowInstance.objects.select_related("version__definition"), pk=instance_id)


def instance_json(instance: WorkflowInstance) -> dict[str, Any]:
    return {
        "id": instance.pk,
        "workflow": instance.version.definition.slug,
        "version": instance.version.number,
        "status": instance.status,
        "reason": instance.halt_reason or None,
        "error": instance.error,
        "context": instance.context,
        "loop_count": instance.loop_count,
        "steps": instance.steps.count(),
        "trace_id": instance.trace_id,
        "tokens": instance.tokens,
        "cost_usd": float(instance.cost_usd),
        "created_at": instance.created_at.isoformat(),
        "finished_at": instance.finished_at.isoformat() if instance.finished_at else None,
    }


@api_view(("GET",))
def node_types(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"node_types": [kind.describe() for kind in known_kinds().values()]})


@api_view(("POST",))
def validate(request: HttpRequest) -> JsonResponse:
    try:
        body = _json_body(request)
    except ValueError as exc:
        return error(400, str(exc))
    graph = body.get("graph", body) if isinstance(body, dict) else body
    issues = validate_graph(graph)
    return JsonResponse({"valid": not issues, "errors": [issue.as_dict() for issue in issues]})


@api_view(("POST",), perm="workflows.add_workflowinstance")
def start_instance(request: HttpRequest, slug: str) -> JsonResponse:
    definition = _get_definition_for_user(request, slug)
    version = definition.latest_version()
    if version is None:
        return error(409, f"workflow {slug!r} has no saved version")
    try:
        body = _json_body(request)
    except ValueError as exc:
        return error(400, str(exc))
    start_input = body.get("input", {}) if isinstance(body, dict) else None
    if not isinstance(start_input, dict):
        return error(400, "'input' must be a JSON object")
    key = request.headers.get("Idempotency-Key") or (body.get("idempotency_key") if isinstance(body, dict) else None)
    try:
        instance = executor.start_instance(version, start_input, idempotency_key=key, user=request.user)
    except PayloadTooLarge as exc:
        return error(413, exc.message)
    except GraphInvalid as exc:
        return error(400, "the saved graph is invalid", errors=[i.as_dict() for i in exc.issues])
    return JsonResponse(instance_json(instance), status=201)


@api_view(("GET",))
def instance(request: HttpRequest, instance_id: int) -> JsonResponse:
    return JsonResponse(instance_json(_get_instance_for_user(request, instance_id)))


@api_view(("GET",))
def instance_events(request: HttpRequest, instance_id: int) -> JsonResponse:
    inst = _get_instance_for_user(request, instance_id)
    try:
        after = int(request.GET.get("after", "0"))
        limit = min(1000, int(request.GET.get("limit", "500")))
    except ValueError:
        return error(400, "'after' and 'limit' must be integers")
    events = inst.events.filter(seq__gt=after).order_by("seq")[:limit]
    return JsonResponse({"events": [e.as_message() for e in events], "last_seq": inst.event_seq})
