"""Threads that may use the ORM without leaving database connections behind.

A Django connection belongs to the thread that opened it and is closed only by that thread (or by
the garbage collector, whenever it finds the thread's locals). A thread that touches the database
and ends without closing its connection leaves a PostgreSQL session open: a pool whose threads
come and go (asyncio's default executor, made anew for each event loop) leaks sessions until
`max_connections` is reached. The pools here keep their threads, check each thread's connection
before every call, and close every thread's connections at shutdown.

- `DjangoThreadPool`: the ai consumer's pools (workflows/aiworker.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.db import close_old_connections, connections

T = TypeVar("T")


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
    consumer makes it its loop's default executor, so `asyncio.to_thread` in node kinds (the circuit
    breaker's and the response cache's database calls) is bounded and clean as well.
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
