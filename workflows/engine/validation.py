"""Graph validation: every issue names the node or edge it is about.

Checks: JSON shape, the graph's size (limits.MAX_NODES, MAX_EDGES), the declared start input
(workflows/engine/inputs.py), node ids and types, each config against its type's JSON Schema, edges
(dangling, duplicate, `when` that does not parse), start/end, reachability, unconditional cycles
(Kahn's algorithm over the unconditional edges; the cycle is named), route literals in conditions,
a `max_transitions` below the activations of the shortest run (engine/activations.py), and each
kind's own checks. Every problem is reported in one pass. Every check is linear in the
graph's size: one walk for reachability, one sort for cycles, sets and dicts for lookups.
"""

from __future__ import annotations

import math
import re
from collections import deque
from typing import Any

import jsonschema

from workflows.engine import activations, compensation_checks, expressions, inputs, limits, route_checks, samples
from workflows.engine.errors import ExpressionError, GraphInvalid, GraphIssue
from workflows.engine.graph import Edge, Graph, GraphSettings
from workflows.engine.nodes import known_kinds
from workflows.engine.priorities import PRIORITIES

QUEUES = ("ai", "io", "default")
ID_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")

_RETRY_SHAPE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_attempts": limits.number(1, limits.MAX_ATTEMPTS, integer=True),
        "backoff_s": limits.number(0, limits.MAX_BACKOFF_S),
        "max_backoff_s": limits.number(0, limits.MAX_BACKOFF_S),
        "jitter": {"type": "boolean"},
    },
}
_TIMEOUT_SHAPE = limits.number(None, limits.MAX_STEP_TIMEOUT_S, exclusive_minimum=0)
# A compensation is a registered function's name, or a node of its own (runtime.compensation_node).
_COMPENSATE_SHAPE: dict[str, Any] = {
    "type": ["object", "string", "null"],
    "properties": {
        "type": {"type": "string"},
        "config": {"type": "object"},
        "queue": {"type": "string", "enum": list(QUEUES)},
        "retry": _RETRY_SHAPE,
        "timeout_s": _TIMEOUT_SHAPE,
    },
}
NODE_SHAPE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "type"],
    "properties": {
        "id": {"type": "string"},
        "type": {"type": "string"},
        "config": {"type": "object"},
        "queue": {"type": "string", "enum": list(QUEUES)},
        "retry": _RETRY_SHAPE,
        "timeout_s": _TIMEOUT_SHAPE,
        "join": {"type": "string", "enum": ["all", "any"]},
        "priority": {"type": "string", "enum": list(PRIORITIES)},
        "fallback": {
            "type": "object",
            "required": ["mode"],
            "properties": {
                "mode": {"type": "string", "enum": ["rule", "review"]},
                "route": {"type": "string"},
                "output": {},
            },
        },
        "compensate": _COMPENSATE_SHAPE,
        "position": {"type": "object", "properties": {"x": limits.number(-limits.MAX_POSITION, limits.MAX_POSITION),
                                                      "y": limits.number(-limits.MAX_POSITION, limits.MAX_POSITION)}},
        "label": {"type": "string"},
        # Test data for the editor's Test panel (engine/samples.py); never read when an instance runs.
        "sample": {"type": "object"},
    },
}
EDGE_SHAPE: dict[str, Any] = {
    "type": "object",
    "required": ["source", "target"],
    "properties": {
        "source": {"type": "string"},
        "target": {"type": "string"},
        "when": {"type": ["string", "null"]},
        "label": {"type": "string"},
    },
}
SETTINGS_SHAPE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "max_transitions": limits.number(1, limits.MAX_TRANSITIONS, integer=True),
        "ttl_s": limits.number(None, limits.MAX_TTL_S, exclusive_minimum=0),
        "max_concurrency": limits.number(1, limits.MAX_CONCURRENCY, integer=True),
        "budget_usd": limits.number(0, limits.MAX_BUDGET_USD),
        "budget_tokens": limits.number(0, limits.MAX_BUDGET_TOKENS, integer=True),
    },
}


def _schema_issues(instance: Any, schema: dict[str, Any], where: str, node: str | None = None,
                   edge: int | None = None) -> list[GraphIssue]:
    validator = jsonschema.Draft202012Validator(schema)
    issues = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.path)):
        path = ".".join(str(p) for p in error.path)
        location = f"{where}.{path}" if path else where
        issues.append(GraphIssue(f"{_subject(node, edge)}{location}: {_readable(error)}", node=node, edge=edge,
                                 field=location))
    return issues


def _readable(error: jsonschema.ValidationError) -> str:
    # "oneOf: [{required: [seconds]}, {required: [until]}]" fails with a dump of the schema; say
    # what the user has to do instead.
    options = error.validator_value
    if (error.validator in ("oneOf", "anyOf") and isinstance(options, list)
            and all(isinstance(o, dict) and set(o) == {"required"} for o in options)):
        names = ", ".join(name for option in options for name in option["required"])
        return f"needs {'exactly' if error.validator == 'oneOf' else 'at least'} one of: {names}"
    return str(error.message)


def _subject(node: str | None, edge: int | None) -> str:
    if node is not None:
        return f"node '{node}': "
    if edge is not None:
        return f"edge {edge + 1}: "
    return ""


def unsafe_value(data: Any, max_depth: int = limits.MAX_JSON_DEPTH) -> str | None:
    """Why `data` cannot be stored or checked safely (nested past max_depth, a NaN or an infinity), or None.

    Iterative, so a hostile document cannot exhaust the stack here.
    """
    stack: list[tuple[Any, str, int]] = [(data, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"holds a number that is not finite ({value}) at {path or 'the top'}"
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                return f"is nested too deeply ({max_depth} levels at most) at {path}"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((item, f"{path}.{key}" if path else str(key), depth + 1) for key, item in items)
    return None


def expression_load_issue(data: Any) -> GraphIssue | None:
    """The graph holds more placeholders and conditions than validation may parse
    (limits.MAX_GRAPH_EXPRESSIONS): counted without parsing, so refusing costs one walk."""
    if not isinstance(data, dict):
        return None
    count = expressions.count_expressions(data)
    if count <= limits.MAX_GRAPH_EXPRESSIONS:
        return None
    return GraphIssue(f"the graph has {count:,} template placeholders and conditions: "
                      f"{limits.MAX_GRAPH_EXPRESSIONS:,} at most (MAX_GRAPH_EXPRESSIONS)", field="graph")


def validate_graph(data: Any, *, imposed_limit: bool = False) -> list[GraphIssue]:
    """Return every issue found; an empty list means the graph is valid.

    `imposed_limit`: the graph's max_transitions was imposed from outside (a planned child's is at most
    what its parent has left), so it is not refused for being below the shortest run: running out
    halts the child into review, where an operator can grant more, as it would any instance."""
    if not isinstance(data, dict):
        return [GraphIssue("the graph must be a JSON object with 'nodes' and 'edges'")]
    problem = unsafe_value(data)
    if problem:
        # Checked first and without recursion: the schema checks below recurse through the graph.
        return [GraphIssue(f"the graph {problem}")]
    issues: list[GraphIssue] = []
    nodes = data.get("nodes")
    edges = data.get("edges", [])
    if not isinstance(nodes, list) or not nodes:
        return [GraphIssue("'nodes' must be a non-empty list")]
    if not isinstance(edges, list):
        return [GraphIssue("'edges' must be a list")]
    # Before any per-node work: past the bounds, nothing else is looked at.
    too_big = [GraphIssue(f"the graph has {len(items):,} {what}: {bound:,} at most ({name})", field=what)
               for items, what, bound, name in ((nodes, "nodes", limits.MAX_NODES, "MAX_NODES"),
                                                (edges, "edges", limits.MAX_EDGES, "MAX_EDGES"))
               if len(items) > bound]
    if too_big:
        return too_big
    load = expression_load_issue(data)
    if load is not None:
        return [load]
    if "settings" in data:
        issues += _schema_issues(data["settings"], SETTINGS_SHAPE, "settings")

    if "input" in data:
        issues += inputs.schema_issues(data["input"])

    kinds = known_kinds()
    seen: set[str] = set()
    named: set[str] = set()  # every id written, even on a malformed node: edges to it are not dangling
    # What the structural checks see: every node with a usable id, even one whose config (or shape)
    # is wrong, so a bad config does not hide a cycle or a dead end until it is fixed.
    skeleton: list[dict[str, Any]] = []
    in_skeleton: set[str] = set()
    checkable: set[str] = set()  # nodes whose config passed: their kind's own checks can run
    for i, raw in enumerate(nodes):
        if not isinstance(raw, dict):
            issues.append(GraphIssue(f"node {i + 1} must be an object", node=f"#{i + 1}"))
            continue
        node_id = raw.get("id")
        label = node_id if isinstance(node_id, str) else f"#{i + 1}"
        if isinstance(node_id, str):
            named.add(node_id)
            if node_id not in in_skeleton:
                in_skeleton.add(node_id)
                skeleton.append(_skeleton_node(raw))
        shape_issues = _schema_issues(raw, NODE_SHAPE, "node", node=label)
        if shape_issues:
            issues += shape_issues
            continue
        node_id = label  # the shape says the id is a string
        if not ID_PATTERN.match(node_id):
            issues.append(GraphIssue(f"node '{node_id}': id must start with a letter or _ and hold only "
                                     "letters, digits, _ and - (64 at most)", node=node_id, field="id"))
            continue
        if node_id in seen:
            issues.append(GraphIssue(f"node '{node_id}': duplicate id", node=node_id, field="id"))
            continue
        seen.add(node_id)
        kind = kinds.get(raw["type"])
        if kind is None:
            issues.append(GraphIssue(f"node '{node_id}': unknown node type '{raw['type']}' "
                                     f"(known: {', '.join(sorted(kinds))})", node=node_id, field="type"))
            continue
        config_issues = _node_config_issues(raw, node_id, kind)
        issues += config_issues
        if not config_issues:
            checkable.add(node_id)

    good_edges = []
    pairs: set[tuple[str, str, str | None]] = set()
    for i, raw in enumerate(edges):
        if not isinstance(raw, dict):
            issues.append(GraphIssue(f"edge {i + 1} must be an object", edge=i))
            continue
        shape_issues = _schema_issues(raw, EDGE_SHAPE, "edge", edge=i)
        if shape_issues:
            issues += shape_issues
            continue
        source, target, when = raw["source"], raw["target"], raw.get("when") or None
        name = f"edge {i + 1} ({source} -> {target})"
        if source not in named:
            issues.append(GraphIssue(f"{name}: source '{source}' is not a node", edge=i, field="source"))
        if target not in named:
            issues.append(GraphIssue(f"{name}: target '{target}' is not a node", edge=i, field="target"))
        if when is not None:
            try:
                expressions.parse(when)
            except ExpressionError as exc:
                issues.append(GraphIssue(f"{name}: condition {exc}", edge=i, field="when"))
                checkable.discard(source)  # its route literals cannot be read
        if (source, target, when) in pairs:
            issues.append(GraphIssue(f"{name}: duplicate edge", edge=i))
            continue
        pairs.add((source, target, when))
        if source in in_skeleton and target in in_skeleton:
            # A condition that does not parse still makes the edge conditional for the cycle check.
            good_edges.append(Edge(index=i, source=source, target=target, when=when))

    # Structural checks run on the skeleton whatever else is wrong: every problem in one pass.
    return issues + _structure_issues(skeleton, good_edges, checkable,
                                       None if imposed_limit else _own_max_transitions(data))


def _own_max_transitions(data: dict[str, Any]) -> int | None:
    """The graph's max_transitions when it sets a usable one (a wrong one is a settings issue already)."""
    settings = data.get("settings")
    value = settings.get("max_transitions") if isinstance(settings, dict) else None
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= limits.MAX_TRANSITIONS
    return value if ok else None


def _skeleton_node(raw: dict[str, Any]) -> dict[str, Any]:
    """The parts of a (possibly malformed) node the structural checks read."""
    node_type = raw.get("type")
    out: dict[str, Any] = {"id": raw["id"], "type": node_type if isinstance(node_type, str) else "?"}
    for key in ("config", "fallback"):
        if isinstance(raw.get(key), dict):
            out[key] = raw[key]
    if isinstance(raw.get("queue"), str):
        out["queue"] = raw["queue"]  # a kind may refuse a queue (a sub-workflow's is never ai)
    return out


def _node_config_issues(raw: dict[str, Any], node_id: str, kind: Any) -> list[GraphIssue]:
    """A node's config against its kind's schema, its templates, and its fallback."""
    config_issues = _schema_issues(raw.get("config") or {}, kind.config_schema, "config", node=node_id)
    for message in expressions.check_templates(
        {k: v for k, v in (raw.get("config") or {}).items() if k not in kind.raw_config_keys}
    ):
        config_issues.append(GraphIssue(f"node '{node_id}': template {message}", node=node_id,
                                        field="config"))
    if "sample" in raw:
        config_issues += [GraphIssue(f"node '{node_id}': {problem}", node=node_id, field="sample")
                          for problem in samples.sample_issues(raw["sample"])]
    # A compensation runs as a node of its own: checked as one (engine/compensation_checks.py).
    config_issues += compensation_checks.compensation_issues(node_id, raw.get("compensate"), known_kinds())
    fallback = raw.get("fallback")
    if fallback and fallback.get("mode") == "rule" and "route" not in fallback and "output" not in fallback:
        config_issues.append(GraphIssue(f"node '{node_id}': a rule fallback needs a route or an output",
                                        node=node_id, field="fallback"))
    return config_issues


def _structure_issues(nodes: list[dict[str, Any]], edges: list[Edge], checkable: set[str],
                      max_transitions: int | None = None) -> list[GraphIssue]:
    issues: list[GraphIssue] = []
    starts = [n["id"] for n in nodes if n["type"] == "start"]
    ends = [n["id"] for n in nodes if n["type"] == "end"]
    if len(starts) != 1:
        # With several, name the second: the editor highlights the one to remove.
        issues.append(GraphIssue("the graph needs exactly one start node" +
                                 (f" (found: {', '.join(starts)})" if starts else " (found none)"),
                                 node=starts[1] if len(starts) > 1 else None))
    if not ends:
        issues.append(GraphIssue("the graph needs at least one end node (found none)"))

    # Edges keep their index in the document, so every message names the edge the designer sees.
    graph = Graph(Graph.from_json({"nodes": nodes}).nodes.values(), edges, GraphSettings())
    if len(starts) == 1:
        start = starts[0]
        for edge in graph.incoming(start):
            issues.append(GraphIssue(f"edge {edge.index + 1} ({edge.label}): nothing may lead into the "
                                     "start node", edge=edge.index, node=start))
        reachable = graph.reachable_from(start) | {start}
        for node_id in graph.nodes:
            if node_id not in reachable:
                issues.append(GraphIssue(f"node '{node_id}' is unreachable from the start node", node=node_id))
        if max_transitions is not None:
            shortest = activations.shortest_run(start, lambda n: graph.nodes[n].type == "end",
                                                lambda n: (edge.target for edge in graph.outgoing(n)))
            if shortest is not None and max_transitions < len(shortest):
                issues.append(GraphIssue(activations.too_few_message(max_transitions, shortest),
                                         field="settings.max_transitions"))
    for end in ends:
        for edge in graph.outgoing(end):
            issues.append(GraphIssue(f"edge {edge.index + 1} ({edge.label}): an end node has no outgoing "
                                     "edges", edge=edge.index, node=end))
    for node in graph.nodes.values():
        if node.type not in ("start", "end") and not graph.outgoing(node.id):
            issues.append(GraphIssue(f"node '{node.id}' has no outgoing edge: every path must reach an end "
                                     "node", node=node.id))
    cycle = unconditional_cycle(graph)
    if cycle:
        path = " -> ".join(cycle + [cycle[0]])
        issues.append(GraphIssue(f"unconditional cycle {path}: every cycle must pass through a conditional "
                                 "edge or a router node", node=cycle[0]))
    issues += route_checks.route_issues(graph, checkable)
    kinds = known_kinds()
    for node in graph.nodes.values():
        if node.id in checkable:
            issues += kinds[node.type].check(node, graph)
    return issues


def unconditional_cycle(graph: Graph) -> list[str]:
    """Kahn's algorithm over unconditional edges leaving non-router nodes.

    Nodes left with incoming edges after the sort lie on (or behind) a cycle; walk back from one to
    name the cycle itself, starting from its node listed first in the graph.
    """
    breaks_cycle = {node_id for node_id, node in graph.nodes.items() if node.type == "router"}
    edges = [e for e in graph.edges if e.when is None and e.source not in breaks_cycle]
    indegree = {node_id: 0 for node_id in graph.nodes}
    successors: dict[str, list[str]] = {node_id: [] for node_id in graph.nodes}
    predecessors: dict[str, list[str]] = {node_id: [] for node_id in graph.nodes}
    for edge in edges:
        indegree[edge.target] += 1
        successors[edge.source].append(edge.target)
        predecessors[edge.target].append(edge.source)
    queue = deque(node_id for node_id, degree in indegree.items() if degree == 0)
    while queue:
        current = queue.popleft()
        for target in successors[current]:
            indegree[target] -= 1
            if indegree[target] == 0:
                queue.append(target)
    remaining = {node_id for node_id, degree in indegree.items() if degree > 0}
    if not remaining:
        return []
    # Every node left keeps a predecessor that is also left, so walking back must repeat a node: the
    # stretch between its two visits is a cycle. (Walking forward could strand on a node that merely
    # lies behind a cycle and leads nowhere.)
    position = {node_id: i for i, node_id in enumerate(graph.nodes)}
    current = min(remaining, key=position.__getitem__)
    path: list[str] = []
    index: dict[str, int] = {}
    while current not in index:
        index[current] = len(path)
        path.append(current)
        current = next(s for s in predecessors[current] if s in remaining)
    cycle = path[index[current]:][::-1]
    first = min(range(len(cycle)), key=lambda i: position[cycle[i]])
    return cycle[first:] + cycle[:first]


def ensure_valid(data: Any) -> Graph:
    issues = validate_graph(data)
    if issues:
        raise GraphInvalid(issues)
    return Graph.from_json(data)
