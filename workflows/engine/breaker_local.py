"""One process's side of a shared circuit breaker: outcomes counted locally, and the shared state
as last seen. Plain Python, clock passed in; the storage lives in workflows/adapters/breakers.py.

Taking the shared row's lock for every LLM call serialised all calls of a provider on one row
(docs/BENCHMARKS.md, proposal 7). Instead each process adds its outcomes here and writes them to the
row now and then, in one locked transaction; state changes still happen on the row, under its lock.
An outcome is written at once (`add` answers True) when it could open the breaker: a failure while
the window as this process knows it (last seen + not yet written) already fails at more than the
ratio. Everything here is guarded by one lock: the ai consumer records from several threads.
"""

from __future__ import annotations

import threading

from workflows.engine import breaker as logic


class LocalCounts:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, list[int]] = {}  # bucket start -> [calls, failures], not yet written
        self._seen: logic.Breaker | None = None  # the shared state as last read or written
        self._seen_at = float("-inf")
        self._written_at = float("-inf")
        self._writing = False

    # --- Outcomes ----------------------------------------------------------------------------------

    def add(self, ok: bool, now: float, config: logic.BreakerConfig) -> bool:
        """Count one outcome. True when it should be written now: it may open the breaker."""
        key = logic.bucket_key(now, config)
        with self._lock:
            calls, failures = self._pending.get(key, [0, 0])
            self._pending[key] = [calls + 1, failures + (0 if ok else 1)]
            if ok:
                return False
            seen = self._seen or logic.Breaker()
            if seen.state != logic.CLOSED:
                return False  # already open (or on trial): window counts change nothing
            known = logic.Breaker(buckets=logic.add_counts(seen.buckets, self._pending))
            total, failed = known.counts(now, config)
            # The ratio alone, not min_calls: other processes' calls may make up the minimum.
            return failed > config.failure_ratio * total

    def take(self) -> dict[str, list[int]]:
        """The pending counts, handed over to be written (give them back if writing fails)."""
        with self._lock:
            pending, self._pending = self._pending, {}
            return pending

    def give_back(self, counts: dict[str, list[int]]) -> None:
        with self._lock:
            self._pending = logic.add_counts(self._pending, counts)

    def has_pending(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def due(self, now: float, every_s: float) -> bool:
        """Counts are waiting and the last write is `every_s` old."""
        with self._lock:
            return bool(self._pending) and now - self._written_at >= every_s

    def begin_write(self) -> bool:
        """Claim the periodic write (one thread at a time; the others just count)."""
        with self._lock:
            if self._writing:
                return False
            self._writing = True
            return True

    def end_write(self) -> None:
        with self._lock:
            self._writing = False

    # --- The shared state as last seen -------------------------------------------------------------

    def seen(self, state: logic.Breaker, now: float, *, written: bool = False) -> None:
        """The shared row as just read (or written, counts included) at `now`."""
        with self._lock:
            self._seen, self._seen_at = state, now
            if written:
                self._written_at = now

    def fresh(self, now: float, max_age_s: float) -> logic.Breaker | None:
        """The shared state if seen less than `max_age_s` ago, else None (read it again)."""
        with self._lock:
            if self._seen is not None and now - self._seen_at < max_age_s:
                return self._seen
            return None

    def last_state(self) -> str:
        with self._lock:
            return self._seen.state if self._seen is not None else logic.CLOSED
