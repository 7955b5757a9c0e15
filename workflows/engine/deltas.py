"""State deltas: what one transition changed in an instance's context, as whole keys.

A delta is {"set": {key: value, ...}, "unset": [key, ...]} (either part may be empty). Applying the
deltas of an instance in order on top of a snapshot of its context gives its context after them;
replaying a delta on a state that already holds it changes nothing once the later deltas are
replayed too (each key ends at its last write), so a snapshot and a delta written in the same
transaction never conflict. Each delta row carries a checksum over its seq and its canonical JSON.

Plain Python: the runtime records deltas (runtime/unit.py), the stores write them, the readers
(store/state_reads.py) rebuild contexts from them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

CANONICAL: dict[str, Any] = {"sort_keys": True, "separators": (",", ":"), "default": str}


def to_json(value: Any) -> str:
    """The one serialisation of a payload: used for the size check and for the write (the size a
    user is told is that of this text)."""
    return json.dumps(value, default=str)


def json_size(context: Mapping[str, Any]) -> int:
    """len(to_json(context)) for a non-empty dict, computed per key (an empty one measures 0):
    each item costs its key's and value's JSON plus 4 (quotes are in the key's JSON; ": " and ", ").
    A context's size is kept on its instance and moved by each delta (store/unit.py)."""
    return sum(len(to_json(key)) + len(to_json(value)) + 4 for key, value in context.items())


def canonical_text(delta: Mapping[str, Any]) -> str:
    return json.dumps(delta, **CANONICAL)


def checksum_text(seq: int, text: str) -> str:
    """The checksum of a delta already serialised canonically (the store's one serialisation)."""
    return hashlib.sha256(f"{seq}:{text}".encode()).hexdigest()


def checksum_of(seq: int, delta: Mapping[str, Any]) -> str:
    return checksum_text(seq, canonical_text(delta))


def make(changed: Mapping[str, Any], removed: Iterable[str]) -> dict[str, Any]:
    return {"set": dict(changed), "unset": sorted(removed)}


def apply(context: dict[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """Apply one delta to `context` in place (the caller owns it) and return it."""
    context.update(delta.get("set") or {})
    for key in delta.get("unset") or ():
        context.pop(key, None)
    return context


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The keys `new` sets (added, or holding another value) and the keys it drops. Values taken over
    unchanged are usually the same objects, so the common case costs a pointer comparison per key."""
    changed = {key: value for key, value in new.items()
               if key not in old or (old[key] is not value and old[key] != value)}
    return changed, {key for key in old if key not in new}
