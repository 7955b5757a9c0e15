"""One process's episodes of failing database writes, logged once per episode rather than per step or
per tick: a database crash or failover (the connection drops), a full disk ("No space left on
device"), a read-only database. The workers' commits (runtime/loop.py) and the scheduler's ticks
report each failure and each success here; the first failure of an episode is logged as a warning,
later ones only at debug, and the first success after them says how long it lasted. Thread-safe.
"""

from __future__ import annotations

from workflows.episodes import Episodes


class DatabaseOutage(Episodes):
    """A process's episodes of failing database writes (the bookkeeping is workflows/episodes.py)."""

    def failed(self, what: str, exc: BaseException, then: str) -> bool:
        """Record a failed database call; True when it begins an episode (logged as a warning)."""
        if not self.begin():
            self.log.debug("%s: %s failed again (%s)", self.who, what, exc)
            return False
        self.log.warning("%s: %s failed (%s); %s (further failures while the database is failing are not "
                         "logged one by one)", self.who, what, str(exc).strip(), then)
        return True

    def recovered(self, call_started: float | None = None) -> bool:
        """Record a successful database call begun at `call_started` (time.monotonic()); True when it
        ends an episode (logged). A call begun before the episode was noticed proves nothing."""
        ended = self.end(call_started)
        if ended is None:
            return False
        self.log.warning("%s: the database accepts writes again after %.1f s (%d failed attempt(s))",
                         self.who, ended.lasted_s, ended.failures)
        return True
