"""RQ bookkeeping for a consumer that keeps many jobs of one queue in flight at once.

RQ 3.0 runs one job at a time per worker (a coroutine job gets its own `asyncio.run`). The `ai`
queue's consumer (workflows/workers/aiworker.py) runs hundreds at once on one event loop, and still wants
RQ's view of them to be true: `rq info` counting them as executing, executions and heartbeats in
the started registry, worker statistics, results and failures recorded the way RQ's own workers
record them, the intermediate list emptied, and maintenance run.

Everything RQ-specific that consumer does goes through `JobBook`, and every call to a private
(underscore) RQ name lives in this module only, each with the reason. The private ones tie us to
RQ's minor version: pyproject.toml pins rq==3.0.0, the import below refuses any other minor
version, and tests/workflows/test_rq_adapter.py checks each hook is still there with the
signature used here.

JobBook's methods are blocking Redis calls: the consumer runs them in threads, never on its loop.
`dequeue` belongs to the one dequeue thread; the others must run in one thread, in the order the
consumer submits them, so that a heartbeat never lands after the finalisation of a job it lists
(a late heartbeat would recreate the hash of a job already deleted with result_ttl=0).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import redis
import rq
from rq import Queue, worker_registration
from rq.exceptions import DequeueTimeout, InvalidJobOperation, NoSuchJobError
from rq.executions import Execution
from rq.job import Job
from rq.logutils import setup_loghandlers
from rq.suspension import is_suspended
from rq.utils import as_text, get_version, now
from rq.worker import BaseWorker, WorkerStatus

from workflows.engine.priorities import fair_order
from workflows.workers.redis_outage import REDIS_ERRORS, Outage

# What finishing a job raises when its Redis data is gone (flushed, lost in a failover, or cleaned up
# after its step was taken back): expected, said in one line (JobBook.finalize).
LOST_JOB_ERRORS = (InvalidJobOperation, NoSuchJobError)

if not rq.VERSION.startswith("3.0."):  # pragma: no cover - guarded by the pin in pyproject.toml
    raise ImportError(f"workflows.workers.rq_adapter is written against rq 3.0.x (found {rq.VERSION}): its private "
                      "hooks must be re-checked (tests/workflows/test_rq_adapter.py) before changing the pin")

log = logging.getLogger("steadyflow.aiworker")

ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]


class ConsumerWorker(BaseWorker):
    """RQ's record of the consumer: registration, heartbeats, statistics and the pubsub command
    channel come from BaseWorker; jobs are never executed through it (the consumer runs them).

    Of RQ's worker commands, `shutdown` works (it sends this process SIGINT: a warm shutdown);
    there is no work horse to kill, and single executions are not stopped from outside: a step
    ends by its own timeout, or by cancelling its instance.
    """

    def execute_job(self, job: Job, queue: Queue) -> None:
        raise NotImplementedError("the ai consumer runs its jobs itself (workflows/workers/aiworker.py)")

    def request_stop_execution(self, execution_id: str) -> None:
        self.log.warning("Worker %s: stopping one execution (%s) is not supported by the ai consumer; "
                         "cancel the workflow instance instead", self.name, execution_id)


@dataclass(eq=False)
class Running:
    """One job this worker has started: what RQ needs to heartbeat and finalise it."""

    job: Job
    queue: Queue
    execution: Execution

    @property
    def job_id(self) -> str:
        return self.job.id


class JobBook:
    """The RQ side of the consumer: one kind's queues (one per priority, highest first), one worker
    record, many running jobs."""

    def __init__(self, queue_name: str | Sequence[str], connection: redis.Redis, *, name: str,
                 monitoring_interval: int = 10, maintenance_interval: int | None = None,
                 fair_every: int = 0) -> None:
        self.connection = connection
        names = [queue_name] if isinstance(queue_name, str) else list(queue_name)
        self.queues = [Queue(queue, connection=connection) for queue in names]
        self.queue = self.queues[0]
        # Priorities (engine/priorities.fair_order): every fair_every-th round lowest first.
        self.fair_every = fair_every
        self._rounds = 0
        kwargs: dict[str, Any] = {}
        if maintenance_interval is not None:
            kwargs["maintenance_interval"] = maintenance_interval
        # The execution and registry TTLs are derived from job_monitoring_interval (+60 s), exactly
        # as for RQ's own workers: a consumer that stops heartbeating is noticed by RQ's cleanup.
        self.worker = ConsumerWorker(self.queues, name=name, connection=connection,
                                     job_monitoring_interval=monitoring_interval, **kwargs)
        self._born = False
        # Where Redis errors are reported, once per outage (set by the consumer).
        self.outage: Outage | None = None
        self._birth_attempts = 0

    @property
    def name(self) -> str:
        return self.worker.name

    # --- Life cycle ---------------------------------------------------------------------------

    def bootstrap(self, logging_level: str = "WARNING") -> None:
        """Register the worker (birth, the queue's worker set, the pubsub command channel): what
        `BaseWorker.bootstrap` does, step by step so that a call that failed on a Redis error can be
        repeated and completes what is left (the consumer retries it while Redis is down)."""
        if not self._born:
            setup_loghandlers(logging_level, name="rq.worker")
            setup_loghandlers(logging_level, name="rq.job")
            self._birth_attempts += 1
            try:
                self.worker.register_birth()
            except ValueError:
                # "There exists an active worker named ...": after an attempt whose reply was lost,
                # that is our own record; on the first attempt it is another worker's.
                if self._birth_attempts == 1:
                    raise
            self._born = True
        if self.worker.pubsub_thread is None:
            self.worker.subscribe()
        self.worker.set_state(WorkerStatus.STARTED)

    def teardown(self) -> None:
        """Register the worker's death and leave the command channel."""
        self.worker.set_state(WorkerStatus.IDLE)
        self.worker.teardown()

    def record_shutdown_requested(self) -> None:
        """What `Worker.request_stop` records: when the warm shutdown was asked for."""
        # PRIVATE: BaseWorker keeps the date in `_shutdown_requested_date` and
        # set_shutdown_requested_date() writes that attribute; there is no public setter.
        self.worker._shutdown_requested_date = now()
        self.worker.set_shutdown_requested_date()

    def suspended(self) -> bool:
        """`rq suspend` in force (also refreshes the worker's heartbeat, as RQ's check does)."""
        return bool(is_suspended(self.connection, self.worker))

    def set_idle(self) -> None:
        self.worker.set_state(WorkerStatus.IDLE)

    # --- Taking jobs ----------------------------------------------------------------------------

    def take(self, limit: int, timeout: int | None) -> list[Running]:
        """Take up to `limit` jobs and start them; [] when the queue stayed empty.

        The first job comes from RQ's own dequeue (`timeout` None does not block, otherwise BLMOVE
        blocks up to that many seconds), atomically into the intermediate list (RQ's reliable-queue
        pattern). Whatever else is queued right then, up to `limit`, follows in one round trip with
        the same LMOVE, and all of them start in one transaction (`start_all`). One job at a time,
        a consumer keeping hundreds in flight spends its ramp-up on round trips.

        With several priority queues, the round takes from the first non-empty one in fair order
        (highest first, every `fair_every`-th round lowest first), and only from it.
        """
        order = fair_order([queue.name for queue in self.queues], self._rounds, self.fair_every)
        by_name = {queue.name: queue for queue in self.queues}
        try:
            result = Queue.dequeue_any([by_name[queue] for queue in order], timeout, connection=self.connection,
                                       job_class=self.worker.job_class, serializer=self.worker.serializer)
        except DequeueTimeout:
            return []
        if result is None:
            return []
        self._rounds += 1
        jobs, queue = [result[0]], result[1]
        if limit > 1 and get_version(self.connection) >= (6, 2, 0):  # LMOVE, as RQ's dequeue uses
            jobs += self._move_more(limit - 1, queue)
        return self.start_all(jobs, queue)

    def dequeue(self, timeout: int | None) -> Running | None:
        """One job, started; None when the queue stayed empty."""
        taken = self.take(1, timeout)
        return taken[0] if taken else None

    def _move_more(self, count: int, queue: Queue) -> list[Job]:
        with self.connection.pipeline(transaction=False) as pipe:
            for _ in range(count):
                pipe.lmove(queue.key, queue.intermediate_queue_key, "LEFT", "RIGHT")
            job_ids = [as_text(job_id) for job_id in pipe.execute() if job_id is not None]
        if not job_ids:
            return []
        try:
            fetched = self.worker.job_class.fetch_many(job_ids, connection=self.connection,
                                                       serializer=self.worker.serializer)
        except Exception:  # noqa: BLE001 - one hash that does not parse: fetch them one by one
            fetched = [self._fetch_or_none(job_id) for job_id in job_ids]
        gone = [job_id for job_id, job in zip(job_ids, fetched, strict=True) if job is None]
        if gone:
            # Ids whose job no longer exists (or cannot be read): RQ's dequeue skips them and leaves
            # them in the intermediate list for maintenance; drop them now.
            with self.connection.pipeline() as pipe:
                for job_id in gone:
                    pipe.lrem(queue.intermediate_queue_key, 1, job_id)
                pipe.execute()
        return [job for job in fetched if job is not None]

    def _fetch_or_none(self, job_id: str) -> Job | None:
        try:
            return self.worker.job_class.fetch(job_id, connection=self.connection,
                                               serializer=self.worker.serializer)
        except Exception:  # noqa: BLE001 - NoSuchJobError or a hash that does not parse
            log.exception("job %s: cannot be read; dropped from the %s queue", job_id, self.queue.name)
            return None

    def start_all(self, jobs: Sequence[Job], queue: Queue | None = None) -> list[Running]:
        """Start dequeued jobs: for each, exactly the writes of RQ's `worker.prepare_execution(job)`
        and `worker.prepare_job_execution(job, remove_from_intermediate_queue=True)` (an execution
        in the started registry and the worker's index, the job STARTED with this worker and its
        heartbeat, its hash persisted, out of the intermediate list), in one transaction for all.
        Public calls only; tests/workflows/test_rq_adapter.py compares the result with RQ's own.
        """
        worker = self.worker
        queue = queue or self.queue
        moment = now()
        running: list[Running] = []
        worker_ttl = 0
        with self.connection.pipeline() as pipe:
            for job in jobs:
                ttl = worker.get_heartbeat_ttl(job)
                execution = Execution.create(job, ttl, pipeline=pipe, worker_name=worker.name)
                worker.executions[execution.id] = execution
                job.heartbeat(moment, ttl, pipeline=pipe)
                job.prepare_for_execution(worker.name, pipeline=pipe)
                pipe.persist(job.key)
                pipe.lrem(queue.intermediate_queue_key, 1, job.id)
                running.append(Running(job=job, queue=queue, execution=execution))
                worker_ttl = max(worker_ttl, ttl)
            if running:
                worker.set_state(WorkerStatus.BUSY, pipeline=pipe)
                worker.heartbeat(worker_ttl, pipeline=pipe)
            pipe.execute()
        return running

    # --- While running --------------------------------------------------------------------------

    def heartbeat(self, running: Sequence[Running]) -> None:
        """One pipeline for the worker and every running job: RQ's `maintain_heartbeats`, batched.

        Keeps the worker hash, each execution and its started-registry entry alive for another
        monitoring interval + 60 s, and sets the worker busy or idle.
        """
        worker = self.worker
        worker_ttl = worker.job_monitoring_interval + 60
        job_hset_index: list[int] = []
        with self.connection.pipeline() as pipe:
            # False when the worker hash expired (a long pause) or Redis restarted empty after an
            # outage (a state write meanwhile may have left a stub without its birth).
            pipe.hexists(worker.key, "birth")
            worker.heartbeat(worker_ttl, pipeline=pipe)
            worker.set_state(WorkerStatus.BUSY if running else WorkerStatus.IDLE, pipeline=pipe)
            moment = now()
            for item in running:
                job = item.job
                working = (moment - job.started_at).total_seconds() if job.started_at else 0.0
                ttl = int(worker.get_heartbeat_ttl(job, working_time=working))
                item.execution.heartbeat(job.started_job_registry, ttl, pipeline=pipe)
                job_hset_index.append(len(pipe))
                job.heartbeat(moment, ttl, pipeline=pipe, xx=True)
            results = pipe.execute()
            # As in RQ: an HSET that created the job hash means the job had already been deleted
            # (result_ttl=0) by the time this heartbeat ran; delete the stub it left.
            stale = [item.job.key for item, index in zip(running, job_hset_index, strict=True)
                     if results[index] == 1]
            lost = not results[0]
            if lost:
                # Write the worker's record whole again, with the worker sets that list it.
                pipe.hset(worker.key, mapping=worker.serialize())
                pipe.expire(worker.key, worker_ttl)
                worker_registration.register(worker, pipe)
            if stale:
                pipe.delete(*stale)
            if stale or lost:
                pipe.execute()

    # --- Finishing ------------------------------------------------------------------------------

    def succeed(self, item: Running, return_value: Any) -> None:
        """Finalise a job that returned: result (per result_ttl), statistics, registries, callbacks."""
        # PRIVATE: BaseWorker._finalize_success is what perform_job runs after a job returns:
        # handle_execution_ended, Retry results, success callback, handle_job_success (result,
        # finished registry, cleanup of the execution and of the job per result_ttl, dependents,
        # rate-limit slot), webhooks. The public pieces alone would miss callbacks and Retry.
        self.worker._finalize_success(item.job, item.queue, item.execution, return_value)

    def fail(self, item: Running, exc_info: ExcInfo) -> None:
        """Finalise a job that raised: failed registry (or RQ retry), failure result, statistics."""
        # PRIVATE: BaseWorker._finalize_failure is what perform_job runs when a job raises:
        # failure callback, exception handlers and logging, then handle_job_failure.
        self.worker._finalize_failure(item.job, item.queue, item.execution, exc_info)

    def requeue(self, item: Running, reason: str) -> None:
        """Give a started job back to the front of its queue, unfinished, in one transaction.

        For a consumer that stops before a job could finish: the execution leaves the started
        registry and the worker's index, and the job is queued again (not failed: nothing about it
        failed). All public calls.
        """
        job, queue = item.job, item.queue
        log.info("job %s: given back to queue %s (%s)", job.id, queue.name, reason)
        job.started_at = None
        job.ended_at = None
        job.worker_name = None
        with self.connection.pipeline() as pipe:
            # enqueue_job first: with a pipeline it expects to start the transaction itself.
            queue.enqueue_job(job, pipeline=pipe, at_front=True)
            self.worker.cleanup_execution(job, pipeline=pipe, execution=item.execution)
            pipe.execute()

    def finalize(self, item: Running, *, return_value: Any = None, exc_info: ExcInfo | None = None,
                 released: str | None = None) -> None:
        """Finalise one job however it ended, never raising: a Redis error is logged and RQ's
        maintenance (abandoned executions) plus our reconciler recover the job."""
        try:
            if released is not None:
                self.requeue(item, released)
            elif exc_info is not None:
                self.fail(item, exc_info)
            else:
                self.succeed(item, return_value)
        except REDIS_ERRORS as exc:
            # Redis is away: said once per outage (the consumer's Outage), not once per job.
            if self.outage is None or self.outage.failed(exc):
                log.warning("job %s: could not record its end in Redis: %s", item.job_id, exc)
            else:
                log.debug("job %s: could not record its end in Redis: %s", item.job_id, exc)
            self.worker.executions.pop(item.execution.id, None)
        except LOST_JOB_ERRORS as exc:
            # The job's data is gone (Redis lost it, or its step was taken back and the job cleaned
            # up): expected in a recovery, and the reconciler owns the step. One line, no traceback,
            # so that the ERRORs left are the ones worth paging for.
            log.info("job %s: its Redis data is gone, end not recorded (%s: %s)", item.job_id,
                     type(exc).__name__, exc)
            self.worker.executions.pop(item.execution.id, None)
        except Exception:  # noqa: BLE001 - bookkeeping must never take the consumer down
            log.exception("job %s: could not record its end in Redis", item.job_id)
            self.worker.executions.pop(item.execution.id, None)

    # --- Maintenance ----------------------------------------------------------------------------

    def maintenance_due(self) -> bool:
        return bool(self.worker.should_run_maintenance_tasks)

    def maintain(self) -> None:
        """RQ's periodic maintenance: abandoned executions, expired registry entries, jobs stuck
        in the intermediate list, dead workers (one worker per queue does it, under a lock)."""
        self.worker.run_maintenance_tasks()

    # --- Inspection (tests, diagnostics) ----------------------------------------------------------

    def intermediate_job_ids(self) -> list[str]:
        return [job_id for queue in self.queues for job_id in queue.intermediate_queue.get_job_ids()]


def set_dequeue_order(worker: BaseWorker, names: Sequence[str]) -> None:
    """Make a worker take from its queues in this order at its next dequeue (names of its queues).

    RQ keeps that order in the private `_ordered_queues`, which its dequeue strategies rearrange
    in `reorder_queues` (called after each dequeue): the hook workers.FairPriorities overrides."""
    by_name = {queue.name: queue for queue in worker.queues}
    worker._ordered_queues = [by_name[name] for name in names]


@contextmanager
def current_job(job: Job) -> Iterator[None]:
    """Make `rq.get_current_job()` return `job` in this context (one asyncio task or thread).

    Job.perform() sets it around the function; the consumer awaits the work itself instead of
    calling perform() (which would `asyncio.run` inside the running loop), so it sets it here.
    asyncio tasks copy the context, so concurrent jobs each see their own.
    """
    # PRIVATE: rq.job._current_job is the ContextVar behind rq.get_current_job(); RQ has no public
    # way to set it outside Job.perform().
    from rq.job import _current_job

    token = _current_job.set(job)
    try:
        yield
    finally:
        _current_job.reset(token)


def exc_info_of(exc: BaseException) -> ExcInfo:
    """An exc_info triple for an exception caught earlier (RQ's failure path wants the triple)."""
    return (type(exc), exc, exc.__traceback__)


__all__ = ["ConsumerWorker", "JobBook", "Running", "current_job", "exc_info_of"]
