"""How many event streams (SSE) and long polls may be open at once: per user and per process.

Each open stream costs a task (SSE) or a thread (a long poll) for as long as it lasts, and a database
connection for each read. Without a cap one viewer opening a hundred streams exhausts the web process's
threads and PostgreSQL's connections and stalls everyone. Past STEADYFLOW_STREAMS_PER_USER (one user's
streams in this process) or STEADYFLOW_STREAMS_PER_PROCESS (everyone's) a new one is answered 429 with
Retry-After. The counts are this process's (each web process has its own threads and connections to
protect); a slot is given back when the stream or the long poll ends, however it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from dashboard.api.v1.problems import Problem

RETRY_AFTER_S = 5


class Slots:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_user: dict[int, int] = {}
        self.total = 0

    def take(self, user_id: int) -> None:
        """Take a slot for `user_id`, or raise a 429 problem naming the limit reached."""
        per_user = int(settings.STEADYFLOW["STREAMS_PER_USER"])
        per_process = int(settings.STEADYFLOW["STREAMS_PER_PROCESS"])
        with self._lock:
            mine = self._by_user.get(user_id, 0)
            if per_user and mine >= per_user:
                message = f"you have {mine} event streams or long polls open: {per_user} at most (STREAMS_PER_USER)"
            elif per_process and self.total >= per_process:
                message = (f"this server has {self.total} event streams or long polls open: {per_process} at most "
                           "(STREAMS_PER_PROCESS)")
            else:
                self._by_user[user_id] = mine + 1
                self.total += 1
                return
        raise Problem(429, f"{message}; close one or retry in {RETRY_AFTER_S} s",
                      headers={"Retry-After": str(RETRY_AFTER_S)})

    def give_back(self, user_id: int) -> None:
        with self._lock:
            left = self._by_user.get(user_id, 0) - 1
            if left > 0:
                self._by_user[user_id] = left
            else:
                self._by_user.pop(user_id, None)
            self.total = max(0, self.total - 1)

    def reset(self) -> None:
        """Forget every slot (the test suite, between tests)."""
        with self._lock:
            self._by_user.clear()
            self.total = 0

    def open_for(self, user_id: int) -> int:
        with self._lock:
            return self._by_user.get(user_id, 0)


SLOTS = Slots()


@contextmanager
def held(user_id: int) -> Iterator[None]:
    """A slot for the duration of a long poll."""
    SLOTS.take(user_id)
    try:
        yield
    finally:
        SLOTS.give_back(user_id)


class Release:
    """Gives one slot back once, whichever comes first: the stream's end or the response's close."""

    def __init__(self, user_id: int) -> None:
        self.user_id = user_id
        self._done = threading.Event()

    def __call__(self, *args: Any) -> None:
        if not self._done.is_set():
            self._done.set()
            SLOTS.give_back(self.user_id)
