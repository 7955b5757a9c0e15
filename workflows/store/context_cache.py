"""The contexts this process last committed (or read outside a transaction), by instance.

A worker continuing an instance (inline, in a batch, or on the instance's next job) reads its
context from here instead of the database: the entry is keyed by the instance's `context_seq`,
which every context change moves, so an entry whose seq differs from the row's is stale and is
simply not used (the reader rebuilds from the database and the entry is replaced). Only committed
contexts go in (after COMMIT, or read in autocommit), so a seq never names two different contexts.

Bounded in bytes (STEADYFLOW["CONTEXT_CACHE_BYTES"]; the size of an entry is the context's JSON size
as its instance row keeps it, `entry_bytes`), least recently used out first, so a worker's memory stays
flat however many instances pass through it. Entries are never handed out or stored by reference:
`get` and `put` copy the top-level dict (values are shared and treated as immutable, as everywhere
in the runtime, which replaces a key rather than changing a value in place).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

_lock = threading.Lock()
_entries: OrderedDict[int, tuple[int, int, dict[str, Any]]] = OrderedDict()  # id -> (seq, bytes, context)
_total = 0


def limit() -> int:
    from django.conf import settings

    return int(settings.STEADYFLOW.get("CONTEXT_CACHE_BYTES", 64 * 1024 * 1024))


def get(instance_id: int, seq: int) -> dict[str, Any] | None:
    with _lock:
        entry = _entries.get(instance_id)
        if entry is None or entry[0] != seq:
            return None
        _entries.move_to_end(instance_id)
        return dict(entry[2])


def entry_bytes(instance: Any) -> int:
    """What an instance's context counts for in the bound: its JSON size (context_bytes, kept by every
    delta), at least 256 (a dict's own cost). Not its snapshot's size: a snapshot refers to its large
    values instead of holding them (store/snapshot_refs.py)."""
    return max(256, int(instance.context_bytes or 0), int(instance.delta_bytes or 0))


def put(instance_id: int, seq: int, size: int, context: dict[str, Any]) -> None:
    global _total
    cap = limit()
    with _lock:
        old = _entries.pop(instance_id, None)
        if old is not None:
            _total -= old[1]
        if size > cap:
            return
        _entries[instance_id] = (seq, size, dict(context))
        _total += size
        while _total > cap and _entries:
            _, (_, dropped, _) = _entries.popitem(last=False)
            _total -= dropped


def drop(instance_id: int) -> None:
    global _total
    with _lock:
        old = _entries.pop(instance_id, None)
        if old is not None:
            _total -= old[1]


def clear() -> None:
    global _total
    with _lock:
        _entries.clear()
        _total = 0


def stats() -> dict[str, int]:
    with _lock:
        return {"entries": len(_entries), "bytes": _total}
