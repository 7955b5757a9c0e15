"""The pages' first JSON endpoints (node types, functions, validation, starting instances, an
instance and its events). What the v1 API shares with them is in dashboard/api/services.py (starting)
and shapes.py (instance_json, events_after); the helpers every endpoint uses are in
dashboard/api/http.py (re-exported here for callers written before the split)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, JsonResponse

from dashboard.api.http import BadRequest as BadRequest
from dashboard.api.http import BodyRejected as BodyRejected
from dashboard.api.http import api_view, error
from dashboard.api.http import csrf_failure as csrf_failure
from dashboard.api.http import json_body as json_body
from dashboard.api.http import not_found as not_found
from dashboard.api.services import MAX_IDEMPOTENCY_KEY, check_idempotency_key, start_workflow
from dashboard.api.shapes import events_after, instance_json
from dashboard.security import permissions
from workflows import runtime
from workflows.credentials.store import validate as validate_graph
from workflows.engine.functions import describe_functions
from workflows.engine.nodes import known_kinds
from workflows.engine.runnable import runnable_issues
from workflows.engine.validation import expression_load_issue
from workflows.models import WorkflowInstance


def _get_instance_for_user(request: HttpRequest, instance_id: int) -> WorkflowInstance:
    instance = WorkflowInstance.objects.select_related("version__definition").filter(pk=instance_id).first()
    if instance is None:
        raise Http404(f"instance {instance_id} does not exist")
    return instance


@api_view(("GET",), perm=permissions.VIEW_GRAPHS)
def node_types(request: HttpRequest) -> JsonResponse:
    # With this deployment's defaults (the llm provider is `scripted` until a real one is configured).
    engine = runtime.engine_config()
    return JsonResponse({"node_types": [kind.describe(engine) for kind in known_kinds().values()]})


@api_view(("GET",), perm=permissions.VIEW_GRAPHS)
def functions(request: HttpRequest) -> JsonResponse:
    """The python functions a `python` node may call: {"functions": [{"name", "doc"}]} (doc: the first
    paragraph of the function's docstring)."""
    return JsonResponse({"functions": describe_functions()})


@api_view(("POST",), perm=permissions.VIEW_GRAPHS)
def validate(request: HttpRequest) -> JsonResponse:
    try:
        body = json_body(request)
    except BodyRejected as exc:
        return error(exc.status, str(exc))
    graph = body.get("graph", body) if isinstance(body, dict) else body
    too_much = expression_load_issue(graph)
    if too_much is not None:
        # Refused before any parse: the request asks for more work than any graph may cost.
        return error(413, too_much.message, errors=[too_much.as_dict()])
    issues = [issue.as_dict() for issue in validate_graph(graph)]
    # What this deployment cannot run (an llm node with nothing to call): not valid, but a save does
    # not refuse it (`kind: deployment`), since a provider may be configured before the first run.
    issues += [{**issue.as_dict(), "kind": "deployment"}
               for issue in runnable_issues(graph, runtime.engine_config().llm_default_provider)]
    return JsonResponse({"valid": not issues, "errors": issues})


def _body_object(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json_body(request)
    except BodyRejected as exc:
        raise BadRequest(str(exc), exc.status) from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


@api_view(("POST",), perm=permissions.START)
def start_instance(request: HttpRequest, slug: str) -> JsonResponse:
    try:
        try:
            body = json_body(request)
        except BodyRejected as exc:
            raise BadRequest(str(exc), exc.status) from None
        start_input = body.get("input", {}) if isinstance(body, dict) else None
        if not isinstance(start_input, dict) or not isinstance(body, dict):
            raise BadRequest("'input' must be a JSON object")
        key = check_idempotency_key(request.headers.get("Idempotency-Key") or body.get("idempotency_key"))
        instance = start_workflow(slug, [start_input], [key], request.user, request.headers.get("traceparent"),
                                  body.get("priority"))[0]
    except BadRequest as exc:
        return exc.response()
    return JsonResponse(instance_json(instance), status=201)


@api_view(("POST",), perm=permissions.START)
def start_instances(request: HttpRequest, slug: str) -> JsonResponse:
    """Start many instances in one transaction: {"inputs": [{...}, ...], "idempotency_keys": [...],
    "priority": "high" | "normal" | "low"} (one priority for all of them)."""
    try:
        body = _body_object(request)
        inputs = body.get("inputs")
        if not isinstance(inputs, list) or not inputs or not all(isinstance(item, dict) for item in inputs):
            raise BadRequest("'inputs' must be a non-empty list of JSON objects")
        keys = body.get("idempotency_keys")
        if keys is not None and (not isinstance(keys, list) or len(keys) != len(inputs) or not all(
                key is None or (isinstance(key, str) and 0 < len(key) <= MAX_IDEMPOTENCY_KEY) for key in keys)):
            raise BadRequest(f"'idempotency_keys' must be a list with one key (a string of 1-"
                             f"{MAX_IDEMPOTENCY_KEY} characters, or null) per input")
        instances = start_workflow(slug, inputs, keys, request.user, request.headers.get("traceparent"),
                                   body.get("priority"))
    except BadRequest as exc:
        return exc.response()
    return JsonResponse({"instances": [instance_json(instance) for instance in instances]}, status=201)


@api_view(("GET",), perm=permissions.VIEW_INSTANCES)
def instance(request: HttpRequest, instance_id: int) -> JsonResponse:
    return JsonResponse(instance_json(_get_instance_for_user(request, instance_id)))


@api_view(("GET",), perm=permissions.VIEW_INSTANCES)
def instance_events(request: HttpRequest, instance_id: int) -> JsonResponse:
    inst = _get_instance_for_user(request, instance_id)
    try:
        after = int(request.GET.get("after", "0"))
        limit = int(request.GET.get("limit", "500"))
    except ValueError:
        return error(400, "'after' and 'limit' must be integers")
    if after < 0 or not 1 <= limit <= 1000:
        # A negative limit would reach the queryset slice and fail with a 500.
        return error(400, "'after' must be 0 or more and 'limit' between 1 and 1000")
    return JsonResponse(events_after(inst, after, limit))
