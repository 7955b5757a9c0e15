"""The web process while the database is away (crashed, restarting, out of disk): pages answer 503
(dashboard/urls.py handler500), and the log says so once per episode, not with a traceback per request
(workflows/episodes.py, shared with the workers' and the scheduler's episodes). The access log
middleware ends the episode at the first request that began after it and did not answer 503."""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError

from workflows.episodes import Episodes

# What Django raises when the database is away: the connection refused or dropped, the server starting
# up or shutting down, no space left (all psycopg OperationalErrors), a connection already closed.
DATABASE_AWAY_ERRORS: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
RETRY_AFTER_S = 5  # what a 503 tells clients to wait before trying again


class DatabaseAway(Episodes):
    def failed(self, exc: BaseException) -> bool:
        """A request failed on the database; True when it begins an episode (logged as a warning)."""
        if not self.begin():
            return False
        self.log.warning("%s: the database is not answering (%s); pages answer 503 until it is back (not "
                         "logged request by request)", self.who, str(exc).strip())
        return True

    def answered(self, began: float) -> bool:
        """A request begun at `began` (time.monotonic()) answered; True when that ends an episode."""
        return self.end_logged(began, "%s: the database answers again after %.1f s (%d request(s) answered 503)")


database_away = DatabaseAway(logging.getLogger("steadyflow.web"), "web")
