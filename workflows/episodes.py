"""Episodes of a failing dependency, counted once per episode rather than once per call.

A process that loses Redis (workers/redis_outage.py) or whose database writes fail (database_outage.py:
a crash, a full disk, a read-only database) retries; what its log should say is when the episode
began and when it ended, however many calls failed and however many threads made them in between.
`Episodes` is that bookkeeping, shared by both: `begin()` records a failed call and says whether it
began an episode, `end()` records a successful one and says whether (and after how long and how many
failures) it ended one. The wording of the log lines is the subclasses'. Thread-safe; plain Python.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Ended:
    """What an episode came to when a successful call ended it."""

    lasted_s: float
    failures: int


class Episodes:
    """One process's episodes of one failing dependency."""

    def __init__(self, logger: logging.Logger, who: str) -> None:
        self.log = logger
        self.who = who
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0
        self.episodes = 0  # how many began (tests and diagnostics)

    @property
    def down(self) -> bool:
        with self._lock:
            return self._since is not None

    def begin(self) -> bool:
        """Record a failed call; True when it begins an episode (the caller logs that one)."""
        with self._lock:
            self._failures += 1
            if self._since is not None:
                return False
            self._since = time.monotonic()
            self._failures = 1
            self.episodes += 1
            return True

    def end(self, call_started: float | None = None) -> Ended | None:
        """Record a successful call begun at `call_started` (time.monotonic()); what the episode came
        to when the call ends one, else None. A call begun before the episode was first noticed (in
        another thread) proves nothing and is ignored."""
        with self._lock:
            if self._since is None:
                return None
            if call_started is not None and call_started < self._since:
                return None
            ended = Ended(time.monotonic() - self._since, self._failures)
            self._since = None
            return ended

    def end_logged(self, call_started: float | None, message: str) -> bool:
        """end(); when the call ends an episode, log `message` (formatted with who, the seconds it lasted
        and its failed calls) as a warning. True when it ended one."""
        ended = self.end(call_started)
        if ended is None:
            return False
        self.log.warning(message, self.who, ended.lasted_s, ended.failures)
        return True


__all__ = ["Ended", "Episodes"]
