"""RQ worker classes for the synchronous queues (`default`, `io`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections, connections
from rq import SimpleWorker, Worker, worker_registration
from rq.exceptions import StopRequested
from rq.worker import BaseWorker, WorkerStatus

from workflows.engine.priorities import fair_order
from workflows.workers import rq_adapter
from workflows.workers.redis_outage import REDIS_ERRORS, Outage, RQConnectionLogFilter, Stopped, until_reachable

T = TypeVar("T")
W = TypeVar("W", bound=BaseWorker)
log = logging.getLogger("steadyflow.worker")


class _DjangoConnections:
    """Drop broken or expired database connections before each job, as Django does per request."""

    def execute_job(self, job: Any, queue: Any) -> Any:
        close_old_connections()
        try:
            return super().execute_job(job, queue)  # type: ignore[misc]
        finally:
            close_old_connections()


class _FairPriorities:
    """Priorities (engine/priorities.py): take from the queues highest priority first, and every
    STEADYFLOW_PRIORITY_FAIR_EVERY-th dequeue lowest first, so low work is never starved."""

    queues: list[Any]
    _dequeues = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fair_every = int(settings.STEADYFLOW.get("PRIORITY_FAIR_EVERY", 0))
        self._set_order()

    def _set_order(self) -> None:
        rq_adapter.set_dequeue_order(self, fair_order([queue.name for queue in self.queues],  # type: ignore[arg-type]
                                                      self._dequeues, self.fair_every))

    def reorder_queues(self, reference_queue: Any) -> None:
        # RQ's hook after each dequeue (its own strategies rotate or shuffle here).
        self._dequeues += 1
        self._set_order()


class _RidesOutRedisOutages:
    """Keeps the worker alive through a Redis outage of any length, at start and while running.

    RQ 3.0's work loop quits on any exception but the dequeue's own ConnectionError (which it retries,
    logging each attempt): a heartbeat, a state change, the suspension check or maintenance that
    meets a dead Redis ends the process, and so does `client_setname` or the birth registration at
    start. Each of those calls is retried here with backoff (redis_outage), one log line per outage;
    a job whose RQ bookkeeping failed is left to RQ's cleanup and our reconciler (the step is in the
    database). A stop request while waiting stops the worker as usual.
    """

    # RQ's own dequeue retry backs off up to 60 s by default: cap it like ours.
    max_connection_wait_time = 5.0

    # Provided by BaseWorker.
    name: str
    key: str
    connection: Any
    is_horse: bool
    log: logging.Logger

    _outage: Outage | None = None
    _stopping = False
    _log_filter: RQConnectionLogFilter | None = None

    @property
    def outage(self) -> Outage:
        if self._outage is None:
            self._outage = Outage(log, f"worker {self.name}")
        return self._outage

    def _until_reachable(self, fn: Callable[[], T]) -> T:
        if self.is_horse:  # a forked work horse reports its errors to its worker as usual
            return fn()
        began, was_down = self.outage.episodes, self.outage.down
        try:
            result = until_reachable(fn, self.outage, lambda: self._stopping)
        except Stopped:
            raise StopRequested() from None
        if was_down or self.outage.episodes != began:
            self._register_again()
        return result

    # --- Start and stop -------------------------------------------------------------------------

    def bootstrap(self, *args: Any, **kwargs: Any) -> None:
        # RQ logs every retry of its dequeue and pubsub loops: route those to the outage log
        # (until teardown: RQ's logger is shared by every worker of the process).
        self._log_filter = RQConnectionLogFilter(self.outage)
        self.log.addFilter(self._log_filter)
        # Its Redis calls (birth, subscription, state) are retried by the overrides below.
        super().bootstrap(*args, **kwargs)  # type: ignore[misc]

    def register_birth(self) -> None:
        attempts = 0

        def birth() -> None:
            nonlocal attempts
            attempts += 1
            try:
                super(_RidesOutRedisOutages, self).register_birth()  # type: ignore[misc]
            except ValueError:
                # "There exists an active worker named ...": after a failed attempt, that is our own
                # registration whose reply was lost; on the first attempt it is another worker.
                if attempts == 1:
                    raise

        self._until_reachable(birth)

    def subscribe(self) -> None:
        self._until_reachable(super().subscribe)  # type: ignore[misc]

    def teardown(self) -> None:
        # Best effort: with Redis away the worker's record expires on its own (its TTL).
        try:
            if self.outage.down:
                log.warning("worker %s: Redis unreachable at exit: its worker record expires by itself",
                            self.name)
            else:
                super().teardown()  # type: ignore[misc]
        except REDIS_ERRORS as exc:
            log.warning("worker %s: could not record its death in Redis (%s); its record expires by itself",
                        self.name, exc)
        finally:
            if self._log_filter is not None:
                self.log.removeFilter(self._log_filter)

    def request_stop(self, signum: Any, frame: Any) -> None:
        self._stopping = True
        super().request_stop(signum, frame)  # type: ignore[misc]

    def set_shutdown_requested_date(self) -> None:
        # Runs in RQ's signal handler: an exception here would surface inside the running job.
        try:
            super().set_shutdown_requested_date()  # type: ignore[misc]
        except REDIS_ERRORS as exc:
            self.outage.failed(exc)

    # --- The work loop's Redis calls ------------------------------------------------------------

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:
            super().heartbeat(timeout, pipeline=pipeline)  # type: ignore[misc]
            return
        self._until_reachable(lambda: super(_RidesOutRedisOutages, self).heartbeat(timeout))  # type: ignore[misc]

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if pipeline is not None:
            super().set_state(state, pipeline=pipeline)  # type: ignore[misc]
            return
        self._until_reachable(lambda: super(_RidesOutRedisOutages, self).set_state(state))  # type: ignore[misc]

    def check_for_suspension(self, burst: bool) -> None:
        self._until_reachable(lambda: super(_RidesOutRedisOutages, self).check_for_suspension(burst))  # type: ignore[misc]

    def run_maintenance_tasks(self) -> None:
        self._until_reachable(super().run_maintenance_tasks)  # type: ignore[misc]
        # Redis may have restarted empty within redis-py's own retries, unnoticed here: the
        # worker's record is checked at each maintenance (every 10 minutes) as well.
        self._register_again()

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        return self._until_reachable(
            lambda: super(_RidesOutRedisOutages, self).dequeue_job_and_maintain_ttl(timeout, max_idle_time))  # type: ignore[misc]

    def maintain_heartbeats(self, job: Any, execution: Any) -> None:
        # A forking worker's heartbeat while its horse runs: one missed is harmless (the TTLs allow
        # a monitoring interval + 60 s), and raising here would abandon a running horse.
        try:
            super().maintain_heartbeats(job, execution)  # type: ignore[misc]
        except REDIS_ERRORS as exc:
            self.outage.failed(exc)

    def execute_job(self, job: Any, queue: Any) -> Any:
        try:
            return super().execute_job(job, queue)  # type: ignore[misc]
        except REDIS_ERRORS as exc:
            # RQ could not start or finalise the job. The step is safe in the database: a job that
            # never ran is re-dispatched by the reconciler, a finished one is already committed.
            self.outage.failed(exc)
            log.warning("worker %s: job %s: RQ could not record its start or end (no Redis); the "
                        "reconciler takes care of its step", self.name, job.id)
            # Waits for Redis (a stop request ends the wait, as anywhere else).
            self.set_state(WorkerStatus.IDLE)
            return None

    # --- Back from an outage --------------------------------------------------------------------

    def _register_again(self) -> None:
        """After an outage: a restarted Redis has lost the worker's record and registrations; write
        them again so `rq info` and RQ's maintenance see this worker."""
        try:
            if self.connection.hexists(self.key, "birth"):
                return
            with self.connection.pipeline() as pipe:
                pipe.hset(self.key, mapping=self.serialize())  # type: ignore[attr-defined]
                worker_registration.register(self, pipe)  # type: ignore[arg-type]
                pipe.expire(self.key, self.worker_ttl + 60)  # type: ignore[attr-defined]
                pipe.execute()
            log.info("worker %s: registered again with Redis (its record was lost)", self.name)
        except REDIS_ERRORS as exc:
            self.outage.failed(exc)


class StepWorker(_FairPriorities, _RidesOutRedisOutages, _DjangoConnections, SimpleWorker):
    """Runs jobs in the worker process itself: no fork per step (a fork costs ~5 ms, docs/STACK_NOTES.md).

    A handler that kills the process takes this worker with it; the supervisor restarts it and the
    reconciler retries the step when its lease expires.
    """


class ForkingStepWorker(_FairPriorities, _RidesOutRedisOutages, _DjangoConnections, Worker):
    """Forks a work horse per job: slower, but a crashing handler only kills the horse."""

    def fork_work_horse(self, job: Any, queue: Any) -> None:
        # Each horse opens its own database connection: one the worker held would be a single server
        # session in two processes, and its prepared statements (named per process by psycopg, from
        # _pg3_0) would collide with those an earlier horse left in it.
        connections.close_all()
        super().fork_work_horse(job, queue)


def make_worker(worker_class: type[W], queues: list[Any], name: str | None = None) -> W:
    """A worker for `queues`, waiting for Redis if it is down: RQ's constructor already talks to it
    (CLIENT SETNAME, to record the worker's address)."""
    outage = Outage(log, f"worker {name or 'for ' + ','.join(q.name for q in queues)} (starting)")
    return until_reachable(lambda: worker_class(queues, connection=queues[0].connection, name=name), outage)
