"""Riding out a Redis outage: retry with backoff, and say so once per outage, not once per retry.

Redis holds only queues (the database says what is due), so a worker, the ai consumer or the
scheduler that loses Redis has nothing to save: it waits, retrying with exponential backoff capped
at MAX_BACKOFF_S, and carries on when Redis answers again. A process that exited instead would leave
its queue unserved wherever no supervisor restarts it.

`Outage` is the log: one warning when the first call fails, one info line when a call succeeds
again (with how long it lasted), whatever the number of retries and threads in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import redis

from workflows.episodes import Episodes

T = TypeVar("T")

# What an unreachable Redis raises (redis-py has already retried the command a few times by then).
REDIS_ERRORS: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 5.0
# Sleep in slices this long so that a stop request is noticed while waiting.
SLEEP_SLICE_S = 0.2


class Backoff:
    """FIRST_BACKOFF_S, doubling up to MAX_BACKOFF_S."""

    def __init__(self, first: float = FIRST_BACKOFF_S, cap: float = MAX_BACKOFF_S) -> None:
        self.first = first
        self.cap = cap
        self.delay = first

    def next(self) -> float:
        delay = self.delay
        self.delay = min(self.delay * 2, self.cap)
        return delay

    def reset(self) -> None:
        self.delay = self.first


class Outage(Episodes):
    """The state of one process's link to Redis, logged once per outage (the bookkeeping is
    workflows/episodes.py, shared with the database's episodes). Thread-safe."""

    def failed(self, exc: BaseException) -> bool:
        """Record a failed Redis call; True when it begins an outage (and was logged)."""
        if not self.begin():
            return False
        self.log.warning("%s: Redis unreachable (%s); retrying with backoff up to %g s until it is back",
                         self.who, exc, MAX_BACKOFF_S)
        return True

    def recovered(self, call_started: float | None = None) -> bool:
        """Record a successful Redis call (begun at `call_started`, time.monotonic()); True when it
        ends an outage (and was logged). A call begun before the outage was first noticed (in
        another thread) proves nothing and is ignored."""
        return self.end_logged(call_started, "%s: Redis reachable again after %.1f s (%d failed attempt(s))")


class Stopped(Exception):
    """Raised by `until_reachable` when the process was asked to stop while waiting for Redis."""


def pause(seconds: float, stopping: Callable[[], bool] | None = None) -> None:
    """Sleep, returning early (in SLEEP_SLICE_S steps) once `stopping()` is true."""
    deadline = time.monotonic() + seconds
    while True:
        if stopping is not None and stopping():
            return
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, SLEEP_SLICE_S))


def until_reachable(fn: Callable[[], T], outage: Outage, stopping: Callable[[], bool] | None = None) -> T:
    """Call `fn` until it gets through to Redis; its result. Other exceptions propagate at once.

    Raises Stopped when `stopping()` turns true while Redis is unreachable.
    """
    backoff = Backoff()
    while True:
        began = time.monotonic()
        try:
            result = fn()
        except REDIS_ERRORS as exc:
            outage.failed(exc)
            if stopping is not None and stopping():
                raise Stopped(f"stopping while Redis is unreachable ({exc})") from exc
            pause(backoff.next(), stopping)
            continue
        outage.recovered(began)
        return result


class RQConnectionLogFilter(logging.Filter):
    """RQ's own retry loops (the dequeue and the pubsub listener threads) log an error on every retry;
    report those to an Outage instead, which says it once per outage."""

    # The message of both RQ 3.0 loops (BaseWorker.dequeue_job_and_maintain_ttl and
    # BaseWorker._pubsub_exception_handler).
    PREFIX = "Worker %s: could not connect to Redis instance"

    def __init__(self, outage: Outage) -> None:
        super().__init__()
        self.outage = outage

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.PREFIX):
            args = record.args if isinstance(record.args, tuple) else ()
            self.outage.failed(args[1] if len(args) > 1 and isinstance(args[1], BaseException)
                               else redis.ConnectionError(record.getMessage()))
            return False
        return True


__all__ = ["MAX_BACKOFF_S", "REDIS_ERRORS", "Backoff", "Outage", "RQConnectionLogFilter", "Stopped", "pause",
           "until_reachable"]
