"""A node's `compensate` spec, validated as the node it runs as (runtime/config.py compensation_node).

A compensation runs automatically when an instance fails, as a step of its own: a registered function's
name (a python node), or `{"type", "config", ...}` of another kind. It used to be checked only for its
outline (an object with a `type` string and a `config` object), so a compensation could name an
unknown kind, a kind that cannot run as one (a human task nobody is asked, a planner or sub-workflow
that starts more work while the instance is being undone), a function that does not exist, or a config
its kind would refuse. Now its config passes its kind's JSON Schema, its templates parse and its
kind's own checks run, with every issue naming the node and the `compensate...` field.

Plain Python, no Django.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from workflows.engine import expressions
from workflows.engine.errors import GraphIssue
from workflows.engine.graph import Graph, GraphSettings, Node

# What a compensation may run as: kinds a worker runs to completion on its own.
COMPENSATION_KINDS = ("python", "http", "llm", "wait")


def spec_as_node(node_id: str, spec: Any) -> tuple[str, dict[str, Any]] | None:
    """(kind, config) of a compensate spec as it runs, or None when it declares none."""
    if not spec:
        return None
    if isinstance(spec, str):
        return "python", {"function": spec}
    if isinstance(spec, dict):
        config = spec.get("config")
        return str(spec.get("type", "python")), dict(config) if isinstance(config, dict) else {}
    return None


def compensation_issues(node_id: str, spec: Any, kinds: dict[str, Any]) -> list[GraphIssue]:
    """What is wrong with `node_id`'s compensate spec, checked as a node of its kind."""
    found = spec_as_node(node_id, spec)
    if found is None:
        return []
    kind_name, config = found
    field = "compensate" if isinstance(spec, str) else "compensate.config"

    def issue(message: str, where: str = field) -> GraphIssue:
        return GraphIssue(f"node '{node_id}': compensation {message}", node=node_id, field=where)

    if kind_name not in COMPENSATION_KINDS:
        return [issue(f"may not be a '{kind_name}' node (use one of: {', '.join(COMPENSATION_KINDS)})",
                      "compensate.type")]
    kind = kinds.get(kind_name)
    if kind is None:  # pragma: no cover - the allowed kinds are built in
        return [issue(f"names an unknown node type '{kind_name}'", "compensate.type")]
    issues = []
    validator = jsonschema.Draft202012Validator(kind.config_schema)
    for error in sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.path]):
        path = ".".join(str(p) for p in error.path)
        issues.append(issue(f"{field}{'.' + path if path else ''}: {error.message}",
                            f"{field}.{path}" if path else field))
    for message in expressions.check_templates({k: v for k, v in config.items() if k not in kind.raw_config_keys}):
        issues.append(issue(f"template {message}"))
    if issues:
        return issues
    node = Node(id=node_id, type=kind_name, config=config)
    own = kind.check(node, Graph([node], [], GraphSettings()))
    for found_issue in own:
        where = found_issue.field or ""
        if isinstance(spec, str) and where == "config.function":
            where = "compensate"
        elif where.startswith("config"):
            where = "compensate." + where
        issues.append(GraphIssue(f"{found_issue.message} (its compensation)", node=node_id, field=where or field))
    return issues
