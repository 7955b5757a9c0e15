"""Field-level detail for the editor's diffs (versions dialog, save conflicts, Plan with AI previews):
which values changed inside a node (`config.prompt`, `retry.max_attempts`) and what changed in a
workflow's declared start input (fields added, removed, changed), so a diff says more than "config".

Values are compared as JSON: objects key by key, anything else (lists included) whole. A side where
the key is absent has no "before" (or "after") entry.
"""

from __future__ import annotations

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
