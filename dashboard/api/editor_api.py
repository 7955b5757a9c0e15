"""JSON endpoints for the workflow editor: versions (list, read, save, restore), diff, expression check.

Node types, whole-graph validation and starting an instance live in dashboard/api/core.py; the editor uses
those too. What the v1 API shares with these is in dashboard/api/services.py (finding a workflow or a
version, saving one), shapes.py (a workflow, a version, a save's answer) and diff_details.py
(graph_diff). Every endpoint needs a login (401) and the viewer role's view permission (403), and
writing needs the designers' permission (403; dashboard/security/permissions.py). Django's CSRF middleware guards every
POST. Errors are JSON with a `message` (and `errors`, each naming its node or edge, when a graph is invalid).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.http import HttpRequest, JsonResponse

from dashboard.api.diff_details import graph_diff
from dashboard.api.http import BadRequest, BodyRejected, api_view, error, json_body
from dashboard.api.services import MAX_MESSAGE, definition_or_404, save_new_version, version_or_404
from dashboard.api.shapes import definition_json, input_schema, saved_json, version_summary
from dashboard.security import permissions
from workflows.authoring.definitions import save_version
from workflows.engine import expressions, route_checks
from workflows.engine.errors import ExpressionError, GraphInvalid
from workflows.engine.graph import Node

SAVE_PERM = permissions.SAVE_VERSION


def _body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object, or BadRequest saying why not."""
    try:
        body = json_body(request)
    except BodyRejected as exc:
        raise BadRequest(str(exc), exc.status) from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def _guarded(view: Any) -> Any:
    """Turn BadRequest into its JSON answer (after api_view's login and method checks)."""

    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        try:
            return view(request, *args, **kwargs)
        except BadRequest as exc:
            return exc.response()

    wrapper.__name__ = view.__name__
    wrapper.__doc__ = view.__doc__
    return wrapper


@api_view(("GET", "POST"), perm=permissions.VIEW_GRAPHS)
@_guarded
def versions(request: HttpRequest, slug: str) -> JsonResponse:
    """GET: the definition and its versions, newest first. POST: save the graph as a new version."""
    if request.method == "POST":
        return _save(request, slug)
    definition = definition_or_404(slug)
    rows = definition.versions.select_related("created_by").annotate(n_instances=Count("instances"))
    latest = definition.latest_version()
    return JsonResponse({
        "workflow": definition_json(definition),
        "versions": [version_summary(v, v.n_instances) for v in rows.order_by("-number")],
        "can_save": request.user.has_perm(SAVE_PERM),
        # What the Run dialog asks for: the latest version's declared start input (None: any object).
        "input_schema": input_schema(latest.graph) if latest else None,
    })


def _save(request: HttpRequest, slug: str) -> JsonResponse:
    message = permissions.refusal(request.user, SAVE_PERM)
    if message is not None:
        return error(403, f"{message} to save")
    return JsonResponse(saved_json(*save_new_version(slug, _body(request), request.user)), status=201)


@api_view(("GET",), perm=permissions.VIEW_GRAPHS)
@_guarded
def version_detail(request: HttpRequest, slug: str, number: int) -> JsonResponse:
    version = version_or_404(definition_or_404(slug), number)
    return JsonResponse({**version_summary(version), "graph": version.graph,
                         "input_schema": input_schema(version.graph)})


@api_view(("POST",), perm=(permissions.VIEW_GRAPHS, SAVE_PERM))
@_guarded
def restore(request: HttpRequest, slug: str, number: int) -> JsonResponse:
    """Save an old version's graph as the newest version (history is never rewritten)."""
    definition = definition_or_404(slug)
    if definition.archived:
        raise BadRequest(f"workflow {slug!r} is archived: unarchive it before restoring a version", 409)
    old = version_or_404(definition, number)
    body = _body(request)
    message = body.get("message") or f"Restored from v{old.number}"
    if not isinstance(message, str) or len(message) > MAX_MESSAGE:
        raise BadRequest(f"the version message must be a string of at most {MAX_MESSAGE} characters")
    latest = definition.latest_version()
    if latest is not None and latest.number != old.number and latest.graph == old.graph:
        # The newest version already holds this graph (a second click on Restore): no duplicate.
        return JsonResponse({"version": version_summary(latest), "restored_from": old.number, "unchanged": True})
    try:
        version = save_version(slug, old.graph, message=message, user=request.user)
    except GraphInvalid as exc:
        # A version saved before a validation rule existed may no longer pass it.
        return error(400, f"v{old.number} no longer passes validation, so it cannot be restored as is",
                     errors=[issue.as_dict() for issue in exc.issues])
    return JsonResponse({"version": version_summary(version), "restored_from": old.number}, status=201)


@api_view(("GET",), perm=permissions.VIEW_GRAPHS)
@_guarded
def diff(request: HttpRequest, slug: str) -> JsonResponse:
    """What changed from version `from` to version `to`: nodes and edges added, removed and changed."""
    definition = definition_or_404(slug)
    if "from" not in request.GET or "to" not in request.GET:
        raise BadRequest("give both versions to compare: ?from=N&to=M")
    old = version_or_404(definition, request.GET["from"])
    new = version_or_404(definition, request.GET["to"])
    return JsonResponse({"from": old.number, "to": new.number, **graph_diff(old.graph, new.graph)})


@api_view(("POST",), perm=permissions.VIEW_GRAPHS)
@_guarded
def check_expression(request: HttpRequest) -> JsonResponse:
    """Check an edge condition against the expression language as it is typed (parse, allow-list, and
    its constant parts evaluated within the evaluation limits; never evaluated against data). A
    refused condition is a 200 with valid: false and the reason; only a malformed request is a 4xx."""
    body = _body(request)
    expression = body.get("expression")
    if expression is None or (isinstance(expression, str) and not expression.strip()):
        return JsonResponse({"valid": True, "empty": True, "message": "no condition: the edge always fires"})
    if not isinstance(expression, str):
        raise BadRequest("'expression' must be a string")
    source = source_node(body.get("source"))
    try:
        expressions.parse(expression)
    except ExpressionError as exc:
        return JsonResponse({"valid": False, "message": f"condition {exc}"})
    routes = route_checks.declared_routes(source) if source is not None else None
    if source is not None and routes is not None:
        # The same check as Validate's: a route the source node never answers makes a dead edge.
        unknown = [r for r in route_checks.route_literals(expression) if r not in routes]
        if unknown:
            tested = ", ".join(map(repr, unknown))
            message = f"condition tests route {tested}, but node '{source.id}' routes only to {', '.join(routes)}"
            return JsonResponse({"valid": False, "message": message})
    return JsonResponse({"valid": True, "message": "condition parses"})


def source_node(raw: Any) -> Node | None:
    """The edge's source node as the editor sends it ({id, type, config?, fallback?}), for the route check."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise BadRequest("'source' must be the edge's source node: an object with 'id' and 'type'")
    config, fallback = raw.get("config"), raw.get("fallback")
    return Node(id=str(raw.get("id", "source"))[:64], type=raw["type"],
                config=config if isinstance(config, dict) else {},
                fallback=fallback if isinstance(fallback, dict) else None)


@api_view(("POST",), perm=(permissions.VIEW_GRAPHS, SAVE_PERM))
@_guarded
def test_node(request: HttpRequest, slug: str, node_id: str) -> JsonResponse:
    """Run one node's handler on sample data (the editor's Test panel; workflows/authoring/node_trial.py):
    body {graph? (the unsaved graph; default the latest version's), sample?, pinned_response?}.
    Designers only: an http node really calls out, a python node really calls its function.
    Nothing is stored (no instance, step or event)."""
    from workflows.authoring import node_trial

    definition = definition_or_404(slug)
    body = _body(request)
    graph = body.get("graph")
    if graph is None:
        latest = definition.latest_version()
        if latest is None:
            raise BadRequest(f"workflow {slug!r} has no saved version: send the graph to test")
        graph = latest.graph
    try:
        answer = node_trial.run_trial(graph, node_id, body.get("sample"), body.get("pinned_response"))
    except node_trial.TrialRefused as exc:
        raise BadRequest(exc.message, exc.status, **exc.extra) from None
    return JsonResponse(answer)
