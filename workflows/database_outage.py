"""One process's episodes of failing database writes, logged once per episode rather than per step or
per tick: a database crash or failover (the connection drops), a full disk ("No space left on
device"), a read-only database. The workers' commits (runtime/loop.py) and the scheduler's ticks
report each failure and each success here; the first failure of an episode is logged as a warning,
later ones only at debug, and the first success after them says how long it lasted. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time


class DatabaseOutage:
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

    def failed(self, what: str, exc: BaseException, then: str) -> bool:
        """Record a failed database call; True when it begins an episode (logged as a warning)."""
        with self._lock:
            self._failures += 1
            if self._since is not None:
                self.log.debug("%s: %s failed again (%s)", self.who, what, exc)
                return False
            self._since = time.monotonic()
            self._failures = 1
            self.episodes += 1
        self.log.warning("%s: %s failed (%s); %s (further failures while the database is failing are not "
                         "logged one by one)", self.who, what, str(exc).strip(), then)
        return True

    def recovered(self, call_started: float | None = None) -> bool:
        """Record a successful database call begun at `call_started` (time.monotonic()); True when it
        ends an episode (logged). A call begun before the episode was noticed proves nothing."""
        with self._lock:
            if self._since is None:
                return False
            if call_started is not None and call_started < self._since:
                return False
            lasted = time.monotonic() - self._since
            failures = self._failures
            self._since = None
        self.log.warning("%s: the database accepts writes again after %.1f s (%d failed attempt(s))",
                         self.who, lasted, failures)
        return True
