"""Per-step time limits and lease heartbeats for synchronous handlers."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from workflows.engine.errors import StepTimeout


@contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise StepTimeout in the running handler after `seconds`.

    SIGALRM only reaches the main thread, which is where RQ workers run jobs; elsewhere the limit
    is not enforced here and the lease (reclaimed by the reconciler) is the backstop.
    """
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise StepTimeout(f"{what} exceeded its timeout of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Heartbeat:
    """Calls `beat` every `interval` seconds in a daemon thread until stopped."""

    def __init__(self, interval: float, beat: Callable[[], None]) -> None:
        self.interval = interval
        self.beat = beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="steadyflow-heartbeat")

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(self.interval):
                try:
                    self.beat()
                except Exception:  # noqa: BLE001 - a missed beat only shortens the lease
                    pass
        finally:
            connection.close()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
