"""The graph diff both APIs answer with (`graph_diff`: the versions dialog, save conflicts, Plan with
AI previews, v1's diff), and its field-level detail: which values changed inside a node
(`config.prompt`, `retry.max_attempts`) and what changed in a workflow's declared start input (fields
added, removed, changed), so a diff says more than "config".

Values are compared as JSON: objects key by key, anything else (lists included) whole. A side where
the key is absent has no "before" (or "after") entry.
"""

from __future__ import annotations

import json
from typing import Any

# How many changed paths one node or input field reports (a rewritten 40-field config stays readable).
MAX_CHANGES = 20


def value_changes(before: Any, after: Any, prefix: str = "") -> list[dict[str, Any]]:
    """The paths whose values differ between two JSON values: [{path, before?, after?}]."""
    out: list[dict[str, Any]] = []
    _walk(before, after, prefix, out, present=(True, True))
    return out[:MAX_CHANGES]


def _walk(before: Any, after: Any, path: str, out: list[dict[str, Any]], present: tuple[bool, bool]) -> None:
    if len(out) >= MAX_CHANGES or (present == (True, True) and before == after):
        return
    if present == (True, True) and isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(before.keys() | after.keys()):
            _walk(before.get(key), after.get(key), f"{path}.{key}" if path else str(key), out,
                  present=(key in before, key in after))
        return
    change: dict[str, Any] = {"path": path}
    if present[0]:
        change["before"] = before
    if present[1]:
        change["after"] = after
    out.append(change)


def node_changes(before: dict[str, Any], after: dict[str, Any], ignored: set[str]) -> list[dict[str, Any]]:
    """What changed inside one node, its id and position aside."""
    return value_changes(_without(before, ignored), _without(after, ignored))


def input_diff(before: Any, after: Any) -> dict[str, Any]:
    """A declared start input's change: fields added and removed (by name), fields changed (with their
    value changes, `required` among them), and changes to the schema's other keys."""
    old = before if isinstance(before, dict) else {}
    new = after if isinstance(after, dict) else {}
    old_fields = _fields(old)
    new_fields = _fields(new)
    old_required = set(_strings(old.get("required")))
    new_required = set(_strings(new.get("required")))
    changed = []
    for name in sorted(old_fields.keys() & new_fields.keys()):
        changes = value_changes(old_fields[name], new_fields[name])
        if (name in old_required) != (name in new_required):
            changes.append({"path": "required", "before": name in old_required, "after": name in new_required})
        if changes:
            changed.append({"name": name, "changes": changes})
    return {
        "declared": [bool(old), bool(new)],
        "added": [{"name": n, "type": new_fields[n].get("type"), "required": n in new_required}
                  for n in sorted(new_fields.keys() - old_fields.keys())],
        "removed": sorted(old_fields.keys() - new_fields.keys()),
        "changed": changed,
        "other": value_changes(_without(old, FIELD_KEYS), _without(new, FIELD_KEYS)) if old and new else [],
    }


FIELD_KEYS = {"properties", "required"}


def _without(obj: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


def _fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    props = schema.get("properties")
    return {k: v for k, v in props.items() if isinstance(v, dict)} if isinstance(props, dict) else {}


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


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
