"""Route literals in edge conditions, checked against the routes their source node declares.

`route == 'fetc'` on an edge leaving an llm node whose routes are fetch and reply can never hold:
the instance would reach a dead end at run time. Validation names the edge instead. Only literal
comparisons are checked (`route == 'x'`, `'x' == route`, `route != 'x'`, `route in ['x', 'y']`,
`route not in (...)`, and the same with `output.route`); anything computed is left to run time.
"""

from __future__ import annotations

import ast
from typing import Any

from workflows.engine import expressions
from workflows.engine.errors import ExpressionError, GraphIssue
from workflows.engine.graph import Graph, Node


def declared_routes(node: Node) -> list[str] | None:
    """The routes a node can answer with, or None when it declares none (nothing to check against)."""
    config = node.config
    routes: list[str] = []
    if node.type == "llm":
        routes = [r for r in config.get("routes") or [] if isinstance(r, str)]
    elif node.type == "router":
        routes = [str(rule["route"]) for rule in config.get("rules") or []
                  if isinstance(rule, dict) and isinstance(rule.get("route"), str)]
        if isinstance(config.get("default"), str):
            routes.append(config["default"])
    if not routes:
        return None
    fallback = node.fallback or {}
    if isinstance(fallback.get("route"), str):
        routes.append(fallback["route"])
    return list(dict.fromkeys(routes))


def _is_route(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id == "route"
    return (isinstance(expr, ast.Attribute) and expr.attr == "route" and isinstance(expr.value, ast.Name)
            and expr.value.id == "output")


def _literals(expr: ast.expr) -> list[str] | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (tuple, list, frozenset)):
        # The expression parser folds constant parts: `('a', 'b')` arrives as one constant.
        items = [v for v in expr.value if isinstance(v, str)]
        return items if len(items) == len(expr.value) else None
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        items = [e.value for e in expr.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return items if len(items) == len(expr.elts) else None
    return None


def route_literals(condition: str) -> list[str]:
    """The string literals `condition` compares `route` with (an empty list when it compares none)."""
    tree: Any = expressions.parse(condition)
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            if isinstance(op, (ast.Eq, ast.NotEq)):
                pairs = [(left, right), (right, left)]
            elif isinstance(op, (ast.In, ast.NotIn)):
                pairs = [(left, right)]
            else:
                continue
            for subject, other in pairs:
                values = _literals(other) if _is_route(subject) else None
                if values:
                    found += values
    return list(dict.fromkeys(found))


def route_issues(graph: Graph, checkable: set[str]) -> list[GraphIssue]:
    """An issue per edge condition naming a route its source node (one of `checkable`) never answers."""
    issues = []
    for edge in graph.edges:
        if edge.when is None or edge.source not in checkable:
            continue
        routes = declared_routes(graph.nodes[edge.source])
        if routes is None:
            continue
        try:
            unknown = [r for r in route_literals(edge.when) if r not in routes]
        except ExpressionError:
            continue  # reported with the edge already
        if unknown:
            issues.append(GraphIssue(
                f"edge {edge.index + 1} ({edge.label}): condition tests route "
                f"{', '.join(repr(r) for r in unknown)}, but node '{edge.source}' routes only to "
                f"{', '.join(routes)}", edge=edge.index, field="when"))
    return issues
