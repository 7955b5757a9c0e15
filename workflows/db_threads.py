"""Threads that may use the ORM without leaving database connections behind.

A Django connection belongs to the thread that opened it and is closed only by that thread (or by
the garbage collector, whenever it finds the thread's locals). A thread that touches the database
and ends without closing its connection leaves a PostgreSQL session open: a pool whose threads
come and go (asyncio's default executor, made anew for each event loop) leaks sessions until
`max_connections` is reached. The pools here keep their threads, check each thread's connection
before every call, and close every thread's connections at shutdown.

- `DjangoThreadPool`: the ai consumer's pools (workflows/workers/aiworker.py).
- `helpers()`: one thread per process for the blocking database helpers (the circuit breaker's
  gate, the llm response cache) of an async node kind run by a synchronous worker on a loop of its
  own (runtime.run_claimed -> LLM.run): its one connection is reused from step to step.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import close_old_connections, connections

T = TypeVar("T")

HELPER_THREADS = 1  # a synchronous worker runs one step at a time


def _fresh_connection_call(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    # What Django does at each request: drop a connection that broke or outlived CONN_MAX_AGE.
    close_old_connections()
    return fn(*args, **kwargs)


def _close_connections_here(barrier: threading.Barrier) -> None:
    connections.close_all()
    try:
        # Hold this thread until every thread has taken one of these tasks.
        barrier.wait(timeout=2)
    except threading.BrokenBarrierError:
        pass


class DjangoThreadPool(ThreadPoolExecutor):
    """A bounded thread pool whose threads may use the ORM.

    Every call starts by dropping stale connections (close_old_connections), and shutdown closes
    each thread's connections in that thread (Django connections belong to their thread). The ai
    consumer makes it its loop's default executor, so what node kinds run off its loop (the circuit
    breaker's and the response cache's database calls, StepCall.offload left None) is bounded and
    clean as well, with no thread hop of its own.
    """

    def __init__(self, max_workers: int, name: str) -> None:
        self._threads_started = 0
        self._closed = False
        self._count_lock = threading.Lock()
        super().__init__(max_workers=max_workers, thread_name_prefix=name, initializer=self._count_thread)

    def _count_thread(self) -> None:
        with self._count_lock:
            self._threads_started += 1

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return super().submit(_fresh_connection_call, fn, args, kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._count_lock:
            closing, self._closed = not self._closed, True
            started = self._threads_started
        if closing and started:
            barrier = threading.Barrier(started)
            for _ in range(started):
                super().submit(_close_connections_here, barrier)
        super().shutdown(wait, cancel_futures=cancel_futures)


_helpers: DjangoThreadPool | None = None
_helpers_lock = threading.Lock()


def helpers() -> DjangoThreadPool:
    """This process's pool for node helpers' database calls made off a short-lived event loop
    (created on first use; its thread and connection last as long as the process)."""
    global _helpers
    with _helpers_lock:
        if _helpers is None:
            _helpers = DjangoThreadPool(HELPER_THREADS, "sf-db-helper")
        return _helpers


def shutdown_helpers() -> None:
    """Close the helpers' connection and end their thread (a later call starts anew): before the
    database goes away (tests). At exit nothing is needed: the session ends with the process."""
    global _helpers
    with _helpers_lock:
        pool, _helpers = _helpers, None
    if pool is not None:
        pool.shutdown(wait=True)


def _forget_helpers() -> None:
    # A forked child (an RQ work horse) has none of the parent's threads: it starts its own pool.
    global _helpers, _helpers_lock
    _helpers, _helpers_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_helpers)
