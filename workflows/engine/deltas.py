"""State deltas: what one transition changed in an instance's context, as whole keys.

A delta is {"set": {key: value, ...}, "unset": [key, ...]} (either part may be empty). Applying the
deltas of an instance in order on top of a snapshot of its context gives its context after them;
replaying a delta on a state that already holds it changes nothing once the later deltas are
replayed too (each key ends at its last write), so a snapshot and a delta written in the same
transaction never conflict. Each delta row carries a checksum over its seq and its canonical JSON.

A snapshot keeps a context's large values by reference: a value whose JSON is at least
STEADYFLOW["SNAPSHOT_REF_BYTES"] long is not copied into the snapshot but named as {key: seq}, the
seq of the delta that last set it (deltas are never changed once written, and each carries its
checksum), so a snapshot costs the context's keys and small values, not its bytes again
(docs/DESIGN.md, "Snapshots by reference").

Plain Python: the runtime records deltas (runtime/unit.py), the stores write them, the readers
(store/state_reads.py) rebuild contexts from them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

SET = "set"  # a delta's part holding the keys it sets (their values); the SQL reads it by this name
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
    return {SET: dict(changed), "unset": sorted(removed)}


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


def large_keys(context: Mapping[str, Any], threshold: int) -> list[str]:
    """The keys a snapshot stores by reference: those whose value's JSON is at least `threshold`
    bytes (0: none). A string long enough is not serialised to be measured."""
    if threshold <= 0:
        return []
    large = []
    for key, value in context.items():
        if isinstance(value, str) and len(value) >= threshold:
            large.append(key)
        elif not isinstance(value, (bool, int, float)) and value is not None and len(to_json(value)) >= threshold:
            large.append(key)
    return large


def value_digest(value: Any) -> str:
    """What a snapshot's reference checks its value against: a hash of the value's canonical JSON."""
    return hashlib.sha256(canonical_text(value).encode()).hexdigest()[:32]


def reference(seq: int, value: Any) -> list[Any]:
    return [seq, value_digest(value)]


def referenced(refs: Any) -> dict[str, tuple[int, str]]:
    """A snapshot's "refs" as read back: {key: (seq, digest)} ({} for a snapshot that has none). A
    malformed entry is kept as (0, "") so that resolving it fails."""
    if not isinstance(refs, dict):
        return {}
    out: dict[str, tuple[int, str]] = {}
    for key, ref in refs.items():
        ok = (isinstance(ref, list) and len(ref) == 2 and isinstance(ref[0], int) and isinstance(ref[1], str))
        out[str(key)] = (ref[0], ref[1]) if ok else (0, "")
    return out


def resolve(inline: Mapping[str, Any], refs: Mapping[str, tuple[int, str]],
            sets: Mapping[int, Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """A snapshot's context: its inline values plus each referenced key's value, taken from the delta
    at its seq and checked against its digest. `sets` maps a seq to that delta's "set" part, or to
    None when the row failed its checksum. None when a reference cannot be followed or its value is
    not the one the snapshot was taken with (the snapshot is then as unusable as a corrupt one)."""
    context = dict(inline)
    for key, (seq, digest) in refs.items():
        values = sets.get(seq)
        if values is None or key not in values or value_digest(values[key]) != digest:
            return None
        context[key] = values[key]
    return context
