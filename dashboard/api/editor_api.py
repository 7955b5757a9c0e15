"""JSON endpoints for the workflow editor: versions (list, read, save, restore), diff, expression check.

Node types, whole-graph validation and starting an instance live in dashboard/api/core.py; the editor uses
those too. Every endpoint needs a login (401) and the viewer role's view permission (403), and writing
needs the designers' permission (403; dashboard/security/permissions.py). Django's CSRF middleware guards every
POST. Errors are JSON with a `message` (and `errors`, each naming its node or edge, when a graph is invalid).
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Count
from django.http import HttpRequest, JsonResponse

from dashboard.api.diff_details import input_diff, node_changes
from dashboard.api.http import BadRequest, BodyRejected, api_view, error, json_body
from dashboard.security import permissions
from workflows.authoring.definitions import save_version
from workflows.engine import expressions, route_checks
from workflows.engine.errors import ExpressionError, GraphInvalid
from workflows.engine.graph import Node
from workflows.models import WorkflowDefinition, WorkflowVersion

SAVE_PERM = permissions.SAVE_VERSION
MAX_MESSAGE = 500  # WorkflowVersion.message's max_length


def _body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object, or BadRequest saying why not."""
    try:
        body = json_body(request)
    except BodyRejected as exc:
        raise BadRequest(str(exc), exc.status) from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def definition_or_404(slug: str) -> WorkflowDefinition:
    definition = WorkflowDefinition.objects.filter(slug=slug).first()
    if definition is None:
        raise BadRequest(f"workflow {slug!r} does not exist", 404)
    return definition


def version_or_404(definition: WorkflowDefinition, number: Any) -> WorkflowVersion:
    try:
        number = int(number)
    except (TypeError, ValueError):
        raise BadRequest(f"version must be a whole number, not {number!r}") from None
    version = definition.versions.filter(number=number).select_related("created_by").first()
    if version is None:
        raise BadRequest(f"workflow {definition.slug!r} has no version {number}", 404)
    return version


def _user_name(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def version_summary(version: WorkflowVersion, instances: int | None = None) -> dict[str, Any]:
    graph = version.graph if isinstance(version.graph, dict) else {}
    out = {
        "number": version.number,
        "message": version.message,
        "created_by": _user_name(version.created_by),
        "created_at": version.created_at.isoformat(),
        "checksum": version.checksum,
        "nodes": len(graph.get("nodes") or []),
        "edges": len(graph.get("edges") or []),
    }
    if instances is not None:
        out["instances"] = instances
    return out


def definition_json(definition: WorkflowDefinition) -> dict[str, Any]:
    return {"slug": definition.slug, "name": definition.name, "description": definition.description,
            "archived": definition.archived}


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


def input_schema(graph: Any) -> dict[str, Any] | None:
    """A version's declared start input (the graph's `input` JSON Schema), or None."""
    schema = graph.get("input") if isinstance(graph, dict) else None
    return schema if isinstance(schema, dict) else None


def _save(request: HttpRequest, slug: str) -> JsonResponse:
    message = permissions.refusal(request.user, SAVE_PERM)
    if message is not None:
        return error(403, f"{message} to save")
    return JsonResponse(saved_json(*save_new_version(slug, _body(request), request.user)), status=201)


def save_new_version(slug: str, body: dict[str, Any], user: Any) -> tuple[WorkflowVersion, WorkflowVersion | None]:
    """Save `body["graph"]` as the workflow's next version (the editor's save and the v1 API's): a message
    is required, and `base_version` must be the latest unless `force`. Returns the new version and the one
    "save anyway" saved over (None when the edit started from the latest). Raises BadRequest."""
    definition = definition_or_404(slug)
    if definition.archived:
        raise BadRequest(f"workflow {slug!r} is archived: unarchive it before saving", 409)
    graph = body.get("graph")
    if not isinstance(graph, dict):
        raise BadRequest("'graph' must be a JSON object with 'nodes' and 'edges'")
    message = body.get("message", "")
    if not isinstance(message, str) or not message.strip():
        raise BadRequest("a version message is required: say what changed")
    if len(message) > MAX_MESSAGE:
        raise BadRequest(f"the version message is too long ({len(message)} characters, {MAX_MESSAGE} at most)")
    name = body.get("name")
    description = body.get("description")
    if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > 200):
        raise BadRequest("'name' must be a non-empty string of at most 200 characters")
    if description is not None and not isinstance(description, str):
        raise BadRequest("'description' must be a string")
    base = body.get("base_version")
    latest = definition.latest_version()
    stale = (latest.number if latest else None) != base
    if not body.get("force") and stale:
        # Someone saved since this editor loaded: say who and what, so the designer can decide.
        who = _user_name(latest.created_by) if latest else None
        raise BadRequest(
            f"version {latest.number if latest else 'none'} was saved"
            f"{f' by {who}' if who else ''} after the version you started from "
            f"({base if base is not None else 'none'}): reload, or save anyway to replace it",
            409, **conflict_details(definition, base, latest, graph))
    try:
        version = save_version(slug, graph, name=name.strip() if name else None, description=description,
                               message=message.strip(), user=user)
    except GraphInvalid as exc:
        raise BadRequest(f"the graph is invalid ({len(exc.issues)} problem{'s' if len(exc.issues) != 1 else ''})",
                         errors=[issue.as_dict() for issue in exc.issues]) from None
    return version, latest if stale else None


def saved_json(version: WorkflowVersion, replaced: WorkflowVersion | None) -> dict[str, Any]:
    """The answer to a save: the workflow and the new version, and `replaced` when "save anyway" saved
    over a version someone else saved after the one the edit started from."""
    answer: dict[str, Any] = {"workflow": definition_json(version.definition), "version": version_summary(version)}
    if replaced is not None:
        answer["replaced"] = version_summary(replaced)
    return answer


def conflict_details(definition: WorkflowDefinition, base: Any, latest: WorkflowVersion | None,
                     graph: dict[str, Any]) -> dict[str, Any]:
    """What a save conflict shows: the version saved meanwhile (`latest`: number, author, time,
    message, and its `graph`), what it changed from the version this editor started from
    (`their_changes`, a graph diff; None when that version is unknown), and what saving anyway would
    change in it (`your_changes`, a diff from `latest` to the graph being saved)."""
    if latest is None:
        return {"latest": None}
    start = definition.versions.filter(number=base).first() if isinstance(base, int) else None
    return {
        "latest": {**version_summary(latest), "graph": latest.graph},
        "their_changes": graph_diff(start.graph, latest.graph) if start is not None else None,
        "your_changes": graph_diff(latest.graph, graph),
    }


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


NODE_IGNORED = {"id", "position"}


def graph_diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Compare two graphs. Nodes match by id; edges by (source, target) in order, so an edge whose
    condition changed shows as changed rather than removed and added."""
    # A graph being saved has not been validated yet: anything that is not a node or edge is skipped.
    old_nodes = {n["id"]: n for n in _list(old.get("nodes")) if isinstance(n, dict) and isinstance(n.get("id"), str)}
    new_nodes = {n["id"]: n for n in _list(new.get("nodes")) if isinstance(n, dict) and isinstance(n.get("id"), str)}
    changed = []
    moved = []
    for node_id in old_nodes.keys() & new_nodes.keys():
        a, b = old_nodes[node_id], new_nodes[node_id]
        fields = sorted(k for k in (a.keys() | b.keys()) - NODE_IGNORED if a.get(k) != b.get(k))
        if fields:
            changed.append({"id": node_id, "fields": fields, "changes": node_changes(a, b, NODE_IGNORED)})
        elif a.get("position") != b.get("position"):
            moved.append(node_id)

    def by_pair(edges: list[Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for edge in edges or []:
            if isinstance(edge, dict):
                out.setdefault((str(edge.get("source")), str(edge.get("target"))), []).append(edge)
        return out

    def edge_json(edge: dict[str, Any]) -> dict[str, Any]:
        return {"source": edge.get("source"), "target": edge.get("target"), "when": edge.get("when") or None}

    old_edges, new_edges = by_pair(_list(old.get("edges"))), by_pair(_list(new.get("edges")))
    edges_added, edges_removed, edges_changed = [], [], []
    for pair in sorted(old_edges.keys() | new_edges.keys()):
        before, after = old_edges.get(pair, []), new_edges.get(pair, [])
        # Edges that are identical on both sides match first; the rest pair up in order.
        keys_after: list[str | None] = [json.dumps(e, sort_keys=True) for e in after]
        rest_before = []
        for edge in before:
            key = json.dumps(edge, sort_keys=True)
            if key in keys_after:
                index = keys_after.index(key)
                keys_after[index] = None
            else:
                rest_before.append(edge)
        rest_after = [e for e, k in zip(after, keys_after, strict=True) if k is not None]
        for a, b in zip(rest_before, rest_after, strict=False):
            fields = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            edges_changed.append({**edge_json(b), "fields": fields, "before": edge_json(a)})
        edges_removed += [edge_json(e) for e in rest_before[len(rest_after):]]
        edges_added += [edge_json(e) for e in rest_after[len(rest_before):]]

    old_settings, new_settings = _dict(old.get("settings")), _dict(new.get("settings"))
    settings = {k: [old_settings.get(k), new_settings.get(k)] for k in sorted(old_settings.keys() | new_settings.keys())
                if old_settings.get(k) != new_settings.get(k)}
    return {
        "nodes": {"added": sorted(new_nodes.keys() - old_nodes.keys()),
                  "removed": sorted(old_nodes.keys() - new_nodes.keys()),
                  "changed": sorted(changed, key=lambda c: c["id"]), "moved": sorted(moved)},
        "edges": {"added": edges_added, "removed": edges_removed, "changed": edges_changed},
        "settings": settings,
        "input_changed": old.get("input") != new.get("input"),
        "input": input_diff(old.get("input"), new.get("input")),
        "identical": old == new,
    }


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


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
