"""RQ worker classes for the synchronous queues (`default`, `io`)."""

from __future__ import annotations

from typing import Any

from django.db import close_old_connections
from rq import SimpleWorker, Worker


class _DjangoConnections:
    """Drop broken or expired database connections before each job, as Django does per request."""

    def execute_job(self, job: Any, queue: Any) -> Any:
        close_old_connections()
        try:
            return super().execute_job(job, queue)  # type: ignore[misc]
        finally:
            close_old_connections()


class StepWorker(_DjangoConnections, SimpleWorker):
    """Runs jobs in the worker process itself: no fork per step (a fork costs ~5 ms, STACK_NOTES).

    A handler that kills the process takes this worker with it; the supervisor restarts it and the
    reconciler retries the step when its lease expires.
    """


class ForkingStepWorker(_DjangoConnections, Worker):
    """Forks a work horse per job: slower, but a crashing handler only kills the horse."""
