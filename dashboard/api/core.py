"""The pages' first JSON endpoints (node types, functions, validation, starting instances, an
instance and its events) and the functions the v1 API shares with them. The helpers every endpoint
uses are in dashboard/api/http.py (re-exported here for callers written before the split)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, JsonResponse

from dashboard.api.http import BadRequest as BadRequest
from dashboard.api.http import BodyRejected as BodyRejected
from dashboard.api.http import api_view, error
from dashboard.api.http import csrf_failure as csrf_failure
from dashboard.api.http import json_body as json_body
from dashboard.api.http import not_found as not_found
from dashboard.security import permissions
from workflows import runtime
from workflows.credentials.store import validate as validate_graph
from workflows.engine.errors import ExpressionError, GraphInvalid, PayloadTooLarge
from workflows.engine.functions import describe_functions
from workflows.engine.inputs import InputInvalid
from workflows.engine.nodes import known_kinds
from workflows.engine.priorities import PriorityInvalid, parse_priority
from workflows.engine.runnable import runnable_issues
from workflows.engine.validation import expression_load_issue
from workflows.models import WorkflowDefinition, WorkflowInstance
from workflows.operators.api_shapes import run_summary

MAX_IDEMPOTENCY_KEY = 200  # WorkflowInstance.idempotency_key's max_length


def _get_instance_for_user(request: HttpRequest, instance_id: int) -> WorkflowInstance:
    instance = WorkflowInstance.objects.select_related("version__definition").filter(pk=instance_id).first()
    if instance is None:
        raise Http404(f"instance {instance_id} does not exist")
    return instance


def instance_json(instance: WorkflowInstance) -> dict[str, Any]:
    """The CLI's run summary (workflows/operators/api_shapes.py) keyed by `id`, with the API's extra fields."""
    data = run_summary(instance)
    data["id"] = data.pop("instance")
    data.update({
        "max_transitions": instance.max_transitions,
        "created_at": instance.created_at.isoformat(),
        "finished_at": instance.finished_at.isoformat() if instance.finished_at else None,
        # The sequence number the status is true at: the live page lets the status win from there on.
        "event_seq": instance.event_seq,
    })
    return data


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


BULK_START_MOST = 1000


def check_idempotency_key(key: Any) -> str | None:
    if key == "":
        return None
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_IDEMPOTENCY_KEY):
        raise BadRequest(f"the idempotency key must be a string of 1-{MAX_IDEMPOTENCY_KEY} characters")
    return key


def start_workflow(slug: str, inputs: list[dict[str, Any]], keys: list[str | None] | None,
                   user: Any, traceparent: str | None = None, priority: Any = None) -> list[WorkflowInstance]:
    """Start instances of a workflow's latest version: what the JSON endpoints and the v1 API both call.
    `traceparent`: the request's W3C header (joined when valid, ignored otherwise). `priority`: high,
    normal (None) or low. Raises BadRequest (404 unknown workflow, 409 no version, 413 too large, 400
    otherwise)."""
    try:
        level = parse_priority(priority)
    except PriorityInvalid as exc:
        raise BadRequest(str(exc), fields={exc.field: str(exc)}) from None
    definition = WorkflowDefinition.objects.filter(slug=slug, archived=False).first()
    if definition is None:
        raise BadRequest(f"workflow {slug!r} does not exist", 404)
    version = definition.latest_version()
    if version is None:
        raise BadRequest(f"workflow {slug!r} has no saved version", 409)
    if len(inputs) > BULK_START_MOST:
        raise BadRequest(f"at most {BULK_START_MOST} instances per request (got {len(inputs)})")
    for key in keys or []:
        check_idempotency_key(key)
    try:
        # Stored in the clients' namespace (runtime/starting.py: internal starts have their own).
        stored = [runtime.client_key(key) for key in keys] if keys is not None else None
        return runtime.start_instances(version, inputs, idempotency_keys=stored, user=user, traceparent=traceparent,
                                       priority=level)
    except PayloadTooLarge as exc:
        raise BadRequest(exc.message, 413) from None
    except GraphInvalid as exc:
        raise BadRequest("the saved graph is invalid", errors=[i.as_dict() for i in exc.issues]) from None
    except InputInvalid as exc:
        raise BadRequest(exc.message, **input_error_details(exc)) from None
    except ExpressionError as exc:
        # A start node's condition that cannot be decided on this input (a missing field, a limit):
        # decided before the start's transaction, so nothing was created.
        raise BadRequest(f"cannot start: {exc}") from None
    except ValueError as exc:  # one key twice
        raise BadRequest(str(exc)) from None


def input_error_details(exc: InputInvalid) -> dict[str, Any]:
    """What a 400 adds to name each field of the start input the workflow's declared input refuses:
    {"message": "input.amount: must be a number", "error": (the same), "fields": {"amount": "must be a
    number"}}, plus "index" (which input) for a bulk start."""
    extra: dict[str, Any] = {"error": exc.message, "fields": exc.fields}
    if exc.index is not None:
        extra["index"] = exc.index
    return extra


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


def events_after(instance: WorkflowInstance, after: int, limit: int) -> dict[str, Any]:
    """An instance's events after sequence number `after` (oldest first, at most `limit`) and its last
    sequence number: what a client polls to follow an instance."""
    events = instance.events.filter(seq__gt=after).order_by("seq")[:limit]
    return {"events": [e.as_message() for e in events], "last_seq": instance.event_seq}


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
