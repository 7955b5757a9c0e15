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

from workflows.episodes import Episodes


class CommitAbandoned(Exception):
    """A step's outcome the database refused for half a lease: given up, so its lease takes the step back
    once the database accepts writes again. Not a failure of the job that ran it (logged once per episode)."""


class DatabaseOutage(Episodes):
    """A process's episodes of failing database writes (the bookkeeping is workflows/episodes.py)."""

    # A full disk comes and goes (writes that need no new space succeed, ending the episode, and the next
    # one that does begins another), so outcomes given up are logged at most once a minute per process,
    # not once per episode.
    GAVE_UP_LOG_EVERY_S = 60.0

    def __init__(self, logger: logging.Logger, who: str) -> None:
        super().__init__(logger, who)
        self._given_up_lock = threading.Lock()
        self._given_up_logged_at: float | None = None
        self._given_up_quiet = 0  # given up since the last line
        self.given_up = 0  # outcomes abandoned to their leases (tests and diagnostics)
        self._last_ended_at: float | None = None  # when the last episode ended (time.monotonic())

    def gave_up(self, what: str, after_s: float, exc: BaseException) -> None:
        """Record an outcome abandoned after `after_s` of failed commits: a warning at most once a minute,
        saying how many went quietly since (before: a warning and a job traceback per step in flight)."""
        now = time.monotonic()
        quiet: int | None = None  # how many went quietly since the last line, when this one is logged
        with self._given_up_lock:
            self.given_up += 1
            last = self._given_up_logged_at
            if last is not None and now - last < self.GAVE_UP_LOG_EVERY_S:
                self._given_up_quiet += 1
            else:
                quiet, self._given_up_quiet, self._given_up_logged_at = self._given_up_quiet, 0, now
        if quiet is None:
            self.log.debug("%s: gave up committing its outcome too (%s)", what, exc)
            return
        since = f"; {quiet} more given up quietly since the last such line" if quiet else ""
        self.log.warning("%s: gave up committing its outcome after %.1f s (%s: %s); its lease takes it back once "
                         "the database accepts writes again (further outcomes given up within a minute are not "
                         "logged one by one%s)", what, after_s, type(exc).__name__, str(exc).strip(), since)

    # An episode that begins within this long of the last one's end is the same trouble coming back (a full
    # disk: writes that need no space succeed in between): its first failure is logged at debug.
    RELAPSE_S = 60.0

    def failed(self, what: str, exc: BaseException, then: str) -> bool:
        """Record a failed database call; True when it begins an episode (logged as a warning, unless the
        last episode ended less than RELAPSE_S ago)."""
        if not self.begin():
            self.log.debug("%s: %s failed again (%s)", self.who, what, exc)
            return False
        ended_at = self._last_ended_at
        if ended_at is not None and time.monotonic() - ended_at < self.RELAPSE_S:
            self.log.debug("%s: %s failed again soon after the database came back (%s)", self.who, what, exc)
            return True
        self.log.warning("%s: %s failed (%s); %s (further failures while the database is failing are not "
                         "logged one by one)", self.who, what, str(exc).strip(), then)
        return True

    def recovered(self, call_started: float | None = None) -> bool:
        """Record a successful database call begun at `call_started` (time.monotonic()); True when it
        ends an episode (logged). A call begun before the episode was noticed proves nothing."""
        if not self.end_logged(call_started, "%s: the database accepts writes again after %.1f s (%d failed "
                                              "attempt(s))"):
            return False
        self._last_ended_at = time.monotonic()
        return True
