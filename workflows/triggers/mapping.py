"""From a webhook's payload to a start input: {input field: JSON pointer or dotted path}.

"/order/items/0/sku" is an RFC 6901 pointer; "order.items.0.sku" the same as a dotted path. Nothing
is evaluated: a path only walks objects (by key) and arrays (by index).
"""

from __future__ import annotations

from typing import Any

MAX_FIELDS = 100
MAX_PATH = 500


class MappingError(ValueError):
    """The mapping is malformed, or the payload lacks what it names."""


def check_mapping(mapping: Any) -> dict[str, str]:
    if not isinstance(mapping, dict):
        raise MappingError("the input mapping must be an object of {input field: path}")
    if len(mapping) > MAX_FIELDS:
        raise MappingError(f"the input mapping has more than {MAX_FIELDS} fields")
    for name, path in mapping.items():
        if not isinstance(name, str) or not name:
            raise MappingError("every input field name must be a non-empty string")
        if not isinstance(path, str) or len(path) > MAX_PATH:
            raise MappingError(f"the path of {name!r} must be a string of at most {MAX_PATH} characters")
    return mapping


def parts_of(path: str) -> list[str]:
    if path == "" or path == "/":
        return [] if path == "" else [""]
    if path.startswith("/"):
        return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]
    return path.split(".")


def resolve(payload: Any, path: str) -> Any:
    value = payload
    for part in parts_of(path):
        if isinstance(value, dict):
            if part not in value:
                raise MappingError(f"the payload has nothing at {path!r} (no key {part!r})")
            value = value[part]
        elif isinstance(value, list):
            if not part.isdigit() or int(part) >= len(value):
                raise MappingError(f"the payload has nothing at {path!r} (no index {part!r})")
            value = value[int(part)]
        else:
            raise MappingError(f"the payload has nothing at {path!r} ({part!r} is inside a scalar)")
    return value


def apply(mapping: dict[str, str], payload: Any) -> dict[str, Any]:
    """The start input. An empty mapping passes an object payload through whole."""
    check_mapping(mapping)
    if not mapping:
        if not isinstance(payload, dict):
            raise MappingError("without an input mapping the payload must be a JSON object")
        return payload
    # In name order: the first error named is the same whatever order the database kept the keys in.
    return {name: resolve(payload, mapping[name]) for name in sorted(mapping)}
