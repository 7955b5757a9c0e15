"""One heartbeat thread per worker process, extending every lease the process holds in one statement.

A step's lease (STEADYFLOW_LEASE_S) is what lets the reconciler take back the steps of a dead
worker. A live worker extends the leases of the steps it is running every LEASE_S / 3. Starting a
thread per step cost 0.10 ms of a no-op step's 0.11 ms (docs/BENCHMARKS.md), so one thread serves
the whole process: running a step only adds and removes its (id, token) under a lock.

Holds are counted: a batch job holds every step it claimed from the claim until their outcomes
commit (the steps waiting for their turn, and those run whose outcomes wait for the others), while
each step also holds its own lease as it runs; the lease is extended until the last hold ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from workflows import clock
from workflows.runtime.config import conf

log = logging.getLogger("steadyflow.leases")


class LeaseKeeper:
    def __init__(self) -> None:
        self._held: dict[tuple[int, str], int] = {}  # (step id, lease token): how many hold it
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def held(self) -> dict[int, str]:
        with self._lock:
            return {step_id: token for step_id, token in self._held}

    @contextmanager
    def holding(self, step_id: int, token: str) -> Iterator[None]:
        """Keep one step's lease alive while it runs (every step: holding_all's work, inlined)."""
        lease = (step_id, token)
        held = self._held
        with self._lock:
            held[lease] = held.get(lease, 0) + 1
            if self._thread is None or not self._thread.is_alive():
                self._start()
        try:
            yield
        finally:
            with self._lock:
                left = held.pop(lease, 0) - 1
                if left > 0:
                    held[lease] = left

    @contextmanager
    def holding_all(self, leases: Iterable[tuple[int, str]]) -> Iterator[None]:
        """Keep these leases alive until the block ends (a batch job's, from claim to commit)."""
        held = tuple(leases)
        self._hold(held)
        try:
            yield
        finally:
            self._release(held)

    def _hold(self, leases: tuple[tuple[int, str], ...]) -> None:
        with self._lock:
            for lease in leases:
                self._held[lease] = self._held.get(lease, 0) + 1
            if self._thread is None or not self._thread.is_alive():
                self._start()

    def _release(self, leases: tuple[tuple[int, str], ...]) -> None:
        with self._lock:
            for lease in leases:
                left = self._held.pop(lease, 0) - 1
                if left > 0:
                    self._held[lease] = left

    def _start(self) -> None:
        """The keeper's thread (under the lock)."""
        self._thread = threading.Thread(target=self._run, daemon=True, name="steadyflow-leases")
        self._thread.start()

    def extend_now(self) -> int:
        """Extend every held lease in one statement; how many steps were still ours."""
        held = self.held()
        if not held:
            return 0
        from workflows.store import get_store

        now = clock.now()
        return get_store().extend_leases(held.items(), now, now + timedelta(seconds=conf("LEASE_S")))

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self._wake.wait(conf("LEASE_S") / 3):
                try:
                    self.extend_now()
                except Exception as exc:  # noqa: BLE001 - a missed beat only shortens the leases
                    log.warning("could not extend %d lease(s): %s", len(self._held), exc)
                    connection.close()
        finally:
            connection.close()


keeper = LeaseKeeper()
