"""v1 workflow definitions: list, get, export a version's graph, validate a graph, save a version, diff.

The editor's endpoints (dashboard/api/editor_api.py) and these share their services (dashboard/api/services.py:
definition_or_404, version_or_404, save_new_version, plan_json), graph_diff (diff_details.py) and the shapes
(shapes.py: version_summary, definition_json, saved_json).
"""

from __future__ import annotations

from typing import Any, Literal

from django.db.models import Count
from django.http import HttpRequest
from ninja import Field, Query, Router, Schema, Status

from dashboard.api.diff_details import graph_diff
from dashboard.api.services import definition_or_404, plan_json, save_new_version, version_or_404
from dashboard.api.shapes import definition_json, saved_json, version_summary
from dashboard.api.v1.auth import need
from dashboard.api.v1.problems import Problem
from dashboard.security import permissions
from workflows.authoring import node_trial, plans
from workflows.credentials.store import (
    validate as validate_graph,  # the graph checks plus credential names  # the graph checks plus credential names
)
from workflows.engine.validation import expression_load_issue
from workflows.models import WorkflowDefinition

router = Router(tags=["workflows"])
VIEW = permissions.VIEW_GRAPHS


@router.get("/workflows", response=dict[str, Any], summary="List workflows")
def list_workflows(request: HttpRequest, archived: bool = False, generated: bool = False) -> dict[str, Any]:
    """Every workflow (archived ones with `archived=true`) and its latest version number. The planner's
    generated plan definitions (`<slug>--plan-<node>`) are left out; `generated=true` lists them instead."""
    need(request, "read", VIEW)
    if generated:
        rows = WorkflowDefinition.objects.filter(plans.generated()).order_by("slug")
    else:
        rows = WorkflowDefinition.objects.filter(archived=archived).exclude(plans.generated()).order_by("slug")
    out = []
    for definition in rows:
        latest = definition.latest_version()
        out.append({**definition_json(definition), "latest_version": latest.number if latest else None})
    return {"items": out}


@router.get("/workflows/{slug}", response=dict[str, Any], summary="Get a workflow and its versions")
def get_workflow(request: HttpRequest, slug: str) -> dict[str, Any]:
    need(request, "read", VIEW)
    definition = definition_or_404(slug)
    rows = definition.versions.select_related("created_by").annotate(n_instances=Count("instances"))
    return {**definition_json(definition),
            "versions": [version_summary(v, v.n_instances) for v in rows.order_by("-number")]}


@router.get("/workflows/{slug}/graph", response=dict[str, Any], summary="Export a version's graph")
def export_graph(request: HttpRequest, slug: str,
                 version: int | None = Query(None, ge=1, le=2**31 - 1, description="Default: the latest.")
                 ) -> dict[str, Any]:
    """The graph document of a version, as `manage.py` and the editor import it."""
    need(request, "read", VIEW)
    definition = definition_or_404(slug)
    if version is None:
        latest = definition.latest_version()
        if latest is None:
            raise Problem(404, f"workflow {slug!r} has no saved version")
        version = latest.number
    found = version_or_404(definition, version)
    return {**version_summary(found), "workflow": slug, "graph": found.graph}


class GraphIn(Schema):
    graph: dict[str, Any] = Field(description="A graph document: nodes, edges, settings.")


@router.post("/validate", response=dict[str, Any], summary="Validate a graph")
def validate(request: HttpRequest, body: GraphIn) -> dict[str, Any]:
    """Check a graph without saving it: `errors` name each problem's node, edge or field."""
    need(request, "read", VIEW)
    too_much = expression_load_issue(body.graph)
    if too_much is not None:
        # Refused before any parse: the request asks for more work than any graph may cost.
        raise Problem(413, too_much.message, [{"field": "body.graph", "message": too_much.message}])
    issues = validate_graph(body.graph)
    return {"valid": not issues, "errors": [issue.as_dict() for issue in issues]}


class SaveIn(Schema):
    graph: dict[str, Any]
    message: str = Field(min_length=1, max_length=500, description="What changed.")
    base_version: int | None = Field(None, description="The version this edit started from (the latest).")
    force: bool = Field(False, description="Save even when someone saved since `base_version`.")
    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = None


@router.post("/workflows/{slug}/versions", response={201: dict[str, Any]}, summary="Save a version")
def save(request: HttpRequest, slug: str, body: SaveIn) -> Status[dict[str, Any]]:
    """Save the graph as the workflow's next version (409 when `base_version` is not the latest)."""
    need(request, "design", VIEW, permissions.SAVE_VERSION)
    return Status(201, saved_json(*save_new_version(slug, body.dict(), request.user)))


class DiffQuery(Schema):
    from_: int = Field(alias="from", ge=1, le=2**31 - 1)
    to: int = Field(ge=1, le=2**31 - 1)


@router.get("/workflows/{slug}/diff", response=dict[str, Any], summary="Diff two versions")
def diff(request: HttpRequest, slug: str, query: Query[DiffQuery]) -> dict[str, Any]:
    need(request, "read", VIEW)
    definition = definition_or_404(slug)
    old, new = version_or_404(definition, query.from_), version_or_404(definition, query.to)
    return {"from": old.number, "to": new.number, **graph_diff(old.graph, new.graph)}


class PlanIn(Schema):
    objective: str = Field(min_length=1, max_length=4000, description="What the workflow should do.")
    provider: Literal["openai", "scripted"] | None = Field(
        None, description="openai or scripted (default: the credential's, else the deployment's)")
    credential: str | None = Field(None, max_length=64, description="An LLM provider credential's name.")
    model: str | None = Field(None, max_length=200)
    script: list[dict[str, Any]] | None = Field(None, description="The scripted provider's replies (tests, "
                                                                 "offline demos): the first's `text` is the graph.")
    current: dict[str, Any] | None = Field(None, description="A graph to diff the proposal against (`diff`).")


@router.post("/workflows/{slug}/plan", response=dict[str, Any], summary="Plan a graph with an LLM")
def plan(request: HttpRequest, slug: str, body: PlanIn) -> dict[str, Any]:
    """Propose a graph for `objective` ({graph, issues, usage}); nothing is saved. A proposal that does
    not validate is refused (400) with `errors` naming each problem's node."""
    need(request, "design", VIEW, permissions.SAVE_VERSION)
    return plan_json(slug, body.dict())


class NodeTestIn(Schema):
    graph: dict[str, Any] | None = Field(None, description="An unsaved graph to test the node in (default: the "
                                                           "latest version's).")
    sample: dict[str, Any] | None = Field(None, description="{context?, input?, steps?}: what the node sees. "
                                                            "Without `sample` and `pinned_response`, the node's "
                                                            "pinned sample (and pinned response) is used.")
    pinned_response: dict[str, Any] | None = Field(None, description="llm nodes: a scripted response "
                                                                     "({\"text\": ...}) instead of the provider.")


@router.post("/workflows/{slug}/nodes/{node_id}/test", response=dict[str, Any], summary="Test one node")
def test_node(request: HttpRequest, slug: str, node_id: str, body: NodeTestIn) -> dict[str, Any]:
    """Run one python, http, llm or router node alone on a sample, as the editor's *Test node* does
    (workflows/authoring/node_trial.py): {node, type, config (rendered, secrets as placeholders), output,
    context_updates, usage, routing (each outgoing edge and whether it fires), error, duration_ms}.
    Nothing is stored. An http node really calls out and a python node really calls its function, so
    this needs the `design` scope and a designer."""
    need(request, "design", VIEW, permissions.SAVE_VERSION)
    definition = definition_or_404(slug)
    graph = body.graph
    if graph is None:
        latest = definition.latest_version()
        if latest is None:
            raise Problem(404, f"workflow {slug!r} has no saved version: send the graph to test")
        graph = latest.graph
    sample, response = body.sample, body.pinned_response
    if sample is None and response is None:
        sample, response = node_trial.pinned_sample(graph, node_id)
    try:
        return node_trial.run_trial(graph, node_id, sample, response)
    except node_trial.TrialRefused as exc:
        errors = exc.extra.get("errors")
        headers = {"Retry-After": "1"} if exc.status == 429 else None
        raise Problem(exc.status, exc.message, errors if isinstance(errors, list) else None, headers) from None
