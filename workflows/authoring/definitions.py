"""Saving workflow definitions as new immutable versions, validated first."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils.text import slugify

from workflows.authoring.plans import is_generated
from workflows.credentials.store import validate as validate_graph
from workflows.engine.errors import GraphInvalid, GraphIssue
from workflows.models import WorkflowDefinition, WorkflowVersion

GRAPH_KEYS = ("nodes", "edges", "settings", "input")
META_KEYS = ("slug", "name", "description")


def split_document(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A graph file may carry its definition's slug, name and description beside the graph."""
    graph = {key: document[key] for key in GRAPH_KEYS if key in document}
    meta = {key: document[key] for key in META_KEYS if key in document}
    return graph, meta


def self_references(slug: str, graph: Any) -> list[GraphIssue]:
    """A subworkflow node that starts its own workflow would nest until max_depth on every run:
    refused at save, naming the node (deeper cycles through other workflows are bounded at run time
    by the node's max_depth)."""
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    return [GraphIssue(f"node '{node.get('id')}': a sub-workflow may not start its own workflow '{slug}'",
                       node=str(node.get("id")), field="config.workflow")
            for node in nodes or [] if isinstance(node, dict) and node.get("type") == "subworkflow"
            and isinstance(node.get("config"), dict) and node["config"].get("workflow") == slug]


def generated_targets(graph: Any) -> list[GraphIssue]:
    """A subworkflow node may not start a definition the planner generated (workflows/authoring/plans.py): a plan
    runs only as its planner step's child, within the bounds that step gave it."""
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    return [GraphIssue(f"node '{node.get('id')}': a sub-workflow may not start the generated plan definition "
                       f"'{node['config']['workflow']}'", node=str(node.get("id")), field="config.workflow")
            for node in nodes or [] if isinstance(node, dict) and node.get("type") == "subworkflow"
            and isinstance(node.get("config"), dict) and isinstance(node["config"].get("workflow"), str)
            and is_generated(node["config"]["workflow"])]


def save_version(slug: str, graph: dict[str, Any], *, name: str | None = None, description: str | None = None,
                 message: str = "", user: Any = None) -> WorkflowVersion:
    """Validate and save `graph` as the next version of the definition `slug` (created if new)."""
    if not slug or slugify(slug) != slug:
        raise GraphInvalid([GraphIssue(f"slug {slug!r} is not valid: use lowercase letters, digits and -")])
    issues = validate_graph(graph) + self_references(slug, graph) + generated_targets(graph)
    if issues:
        raise GraphInvalid(issues)
    user = user if getattr(user, "pk", None) else None
    with transaction.atomic():
        definition, created = WorkflowDefinition.objects.select_for_update().get_or_create(
            slug=slug, defaults={"name": name or slug, "description": description or "", "created_by": user})
        if not created and (name or description is not None):
            changed = []
            if name and definition.name != name:
                definition.name = name
                changed.append("name")
            if description is not None and definition.description != description:
                definition.description = description
                changed.append("description")
            if changed:
                definition.save(update_fields=changed)
        latest = definition.versions.aggregate(n=Max("number"))["n"] or 0
        return WorkflowVersion.objects.create(definition=definition, number=latest + 1, graph=graph,
                                              message=message, created_by=user)


def save_document(document: dict[str, Any], *, slug: str | None = None, message: str = "",
                  user: Any = None, skip_unchanged: bool = False) -> tuple[WorkflowVersion, bool]:
    """Save a graph file (graph plus optional slug/name/description). Returns (version, created)."""
    if not isinstance(document, dict):
        raise GraphInvalid([GraphIssue("the graph must be a JSON object with 'nodes' and 'edges'")])
    graph, meta = split_document(document)
    slug = slug or meta.get("slug")
    if not slug:
        raise GraphInvalid([GraphIssue("the graph file has no 'slug': name the definition to save it under")])
    if skip_unchanged:
        existing = WorkflowDefinition.objects.filter(slug=slug).first()
        latest = existing.latest_version() if existing else None
        if latest is not None and latest.graph == graph:
            return latest, False
    version = save_version(slug, graph, name=meta.get("name"), description=meta.get("description"),
                           message=message, user=user)
    return version, True
