"""The `ai` queue's consumer: hundreds of LLM calls in flight in one process (docs/DESIGN.md, worker `ai`).

RQ 3.0 runs one job at a time per worker, so 300 slow LLM calls would need 300 processes or
threads. This consumer is built on RQ's worker, queue and registry API instead (all of it behind
workflows/workers/rq_adapter.py) and runs the calls on one asyncio event loop:

- one dequeue thread takes jobs with RQ's blocking dequeue (never on the loop) while fewer than
  `max_in_flight` are running, with whatever else is queued at that moment in the same round trip
  (up to DEQUEUE_BATCH), starts them in RQ (started registry, execution, out of the intermediate
  list) and hands them to the loop;
- each job is a task on the loop: claim the step, build its call, `await kind.arun(call)` under the
  node's timeout, commit the outcome (workflows/workers/ai_steps.py). The ORM calls run in a small
  thread pool (AI_DB_THREADS); the loop itself never touches the database. A node kind without `arun`
  runs in a second pool;
- one bookkeeping thread does every other Redis write, in order: finalising jobs (results,
  failures, statistics), one pipelined heartbeat for the worker and all in-flight jobs each
  monitoring interval, RQ's maintenance;
- a ticker on the loop sends those heartbeats and, every LEASE_S / 3, extends the step leases of
  all in-flight steps in one transaction so the reconciler does not take back a long call.

What an exception does: a handler's exception is the step's error, mapped exactly as
`runtime.run_claimed` maps it (a timeout becomes StepTimeout) and committed by `finish_step`; an
exception outside the handler (database down, a malformed job) fails the RQ job, recorded as RQ
records failures. Neither stops the consumer.

Inline continuation is off here (`ALLOW_INLINE`): `finish_step` would only claim a successor that
is not async and on this same queue, that is a synchronous node misrouted to `ai`, which belongs on
its own queue rather than in this consumer's small thread pool. Successors are enqueued as usual.

Shutdown (SIGTERM, SIGINT or RQ's `shutdown` command): dequeuing stops at once; in-flight jobs get
AI_SHUTDOWN_GRACE_S to finish; then the handler calls still running are cancelled, their steps
released (queued again, the attempt not counted) and their jobs put back at the front of the
queue. A second signal skips the rest of the grace period. `--burst` exits when the queue is empty
and nothing is in flight (a finishing LLM step may enqueue another).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, TypeVar

import django_rq
import redis
from django.conf import settings
from django.core.management.base import CommandError
from django.db import DatabaseError

from workflows import clock, runtime
from workflows.adapters import breakers
from workflows.database_outage import CommitAbandoned, DatabaseOutage
from workflows.db_threads import DjangoThreadPool
from workflows.engine import providers
from workflows.engine.priorities import queue_names
from workflows.store import get_store
from workflows.workers import dispatch, rq_adapter
from workflows.workers.ai_steps import RELEASE_REASON, InFlight, StepJobs, in_pool
from workflows.workers.groupcommit import GroupCommits
from workflows.workers.redis_outage import (
    REDIS_ERRORS,
    Backoff,
    Outage,
    RQConnectionLogFilter,
    Stopped,
    until_reachable,
)

log = logging.getLogger("steadyflow.aiworker")

T = TypeVar("T")

QUEUE = "ai"
# Synchronous node kinds that land on the ai queue.
SYNC_THREADS = 4
# BLMOVE's timeout: how soon the dequeue thread notices a stop request.
DEQUEUE_BLOCK_S = 1
TICK_S = 0.5
SUSPENSION_CHECK_S = 1.0
# Most jobs taken (and started in RQ) in one round of the dequeue thread.
DEQUEUE_BATCH = 100
ALLOW_INLINE = False
# After the grace period: how long to wait for releases and for synchronous handlers to return.
RELEASE_WAIT_S = 20.0


def _extend_leases(claims: list[runtime.Claim]) -> None:
    # One statement for all in-flight steps: one commit instead of hundreds.
    now = clock.now()
    get_store().extend_leases([(claim.step.pk, claim.token) for claim in claims], now,
                              now + timedelta(seconds=runtime.conf("LEASE_S")))


class AIConsumer:
    """Consumes one RQ queue with many jobs in flight on one event loop. `run()` blocks until stopped."""

    def __init__(self, *, name: str | None = None, max_in_flight: int | None = None, burst: bool = False,
                 grace_s: float | None = None, monitoring_interval: int | None = None,
                 queue: str = QUEUE, connection: redis.Redis | None = None) -> None:
        conf = settings.STEADYFLOW
        # host:pid like the synchronous workers' step records, plus a random part: a restarted
        # container often reuses its hostname and pid, and RQ refuses a name whose record is alive.
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{queue}-{secrets.token_hex(3)}"
        self.max_in_flight = int(max_in_flight or conf["LLM_MAX_IN_FLIGHT"])
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1 (got {self.max_in_flight})")
        self.burst = burst
        self.grace_s = float(conf["AI_SHUTDOWN_GRACE_S"] if grace_s is None else grace_s)
        self.monitoring_interval = int(monitoring_interval or conf["AI_MONITORING_INTERVAL_S"])
        self.lease_every_s = float(conf["LEASE_S"]) / 3
        # Redis may be down now or at any later moment: every Redis call is retried or reported to
        # this, which logs once per outage (workflows/workers/redis_outage.py).
        self.outage = Outage(log, f"ai consumer {self.name}")
        self.database = DatabaseOutage(log, f"ai consumer {self.name}")  # its periodic work's database calls
        # RQ's worker constructor already talks to Redis (CLIENT SETNAME): wait for it.
        self.book = until_reachable(
            lambda: rq_adapter.JobBook(queue_names(queue), connection or django_rq.get_connection(queue),
                                       name=self.name, monitoring_interval=self.monitoring_interval,
                                       fair_every=int(conf.get("PRIORITY_FAIR_EVERY", 0))), self.outage)
        self.book.outage = self.outage
        # RQ's pubsub listener logs every reconnection attempt: once per outage is enough (removed
        # at exit: RQ's logger is shared by every worker of the process).
        self._log_filter = RQConnectionLogFilter(self.outage)
        self.book.worker.log.addFilter(self._log_filter)
        # ORM work per LLM step is a few short transactions (claim, build, breaker, finish): a few
        # threads keep up with hundreds of calls in flight (SQLite serialises writers anyway).
        self.db = DjangoThreadPool(int(conf["AI_DB_THREADS"]), "sf-ai-db")
        self.sync = DjangoThreadPool(SYNC_THREADS, "sf-ai-sync")
        # One thread, so Redis bookkeeping happens in submission order (see rq_adapter).
        self.bookkeeper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sf-ai-rq")
        self.commits = GroupCommits(lambda fn, *a, **k: self._in(self.db, fn, *a, **k),
                                    window_s=float(conf["AI_GROUP_COMMIT_MS"]) / 1000,
                                    most=int(conf["AI_GROUP_COMMIT_MAX"]))
        # What one job does on the loop: claim, build, await the handler, commit (ai_steps.py).
        self.steps = StepJobs(self.name, self.db, self.sync, self.commits, lambda: self._releasing)
        self._slots = threading.BoundedSemaphore(self.max_in_flight)
        self._count_lock = threading.Lock()
        self._active = 0  # dequeued and not yet finalised (the dequeue thread and the loop change it)
        self._in_flight: dict[str, InFlight] = {}  # by execution id; loop only: heartbeats and leases
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop_dequeue = threading.Event()
        self._releasing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dequeuer = threading.Thread()
        self.exit_code = 0
        self._stopping: asyncio.Event | None = None
        self.jobs_done = 0

    # --- Entry point ----------------------------------------------------------------------------

    def run(self) -> int:
        """Consume until stopped; the process's exit status."""
        try:
            asyncio.run(self._main())
        finally:
            self.db.shutdown(wait=True)
            # A synchronous handler stuck past the shutdown keeps its thread; its step's lease
            # expires and the reconciler takes it back.
            self.sync.shutdown(wait=False, cancel_futures=True)
            self.bookkeeper.shutdown(wait=True)
            self.book.worker.log.removeFilter(self._log_filter)
        log.info("ai consumer %s stopped after %d job(s)", self.name, self.jobs_done)
        return self.exit_code

    @property
    def active(self) -> int:
        with self._count_lock:
            return self._active

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stopping = asyncio.Event()
        loop.set_default_executor(self.db)
        loop.set_exception_handler(self._loop_exception)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            # Retried while Redis is down; a signal meanwhile stops the consumer before it starts.
            await self._book(until_reachable, lambda: self.book.bootstrap("WARNING"), self.outage,
                             self._stopping.is_set)
        except ValueError as exc:  # RQ: "There exists an active worker named ..."
            raise CommandError(f"the ai consumer cannot register with RQ: {exc} (choose another --name, or "
                               "wait until that worker's record expires)") from None
        except Stopped:
            log.info("ai consumer %s: stopped before Redis could be reached", self.name)
            return
        log.info("ai consumer %s: queues %s, up to %d jobs in flight%s", self.name,
                 ", ".join(queue.name for queue in self.book.queues),
                 self.max_in_flight, " (burst)" if self.burst else "")
        self._dequeuer = threading.Thread(target=self._dequeue_loop, name="sf-ai-dequeue", daemon=True)
        self._dequeuer.start()
        ticker = asyncio.create_task(self._tick(), name="ai-ticker")
        try:
            await self._stopping.wait()
        finally:
            self._stop_dequeue.set()
            while self._dequeuer.is_alive():
                await asyncio.sleep(0.02)
            await self._drain()
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            if self.outage.down:
                # Each command would first spend redis-py's retries; the record expires by itself.
                log.warning("ai consumer %s: Redis unreachable at exit: its worker record expires by itself",
                            self.name)
            else:
                await self._quietly(self._book(self.book.teardown), "worker teardown")
            await providers.close_sessions()

    # --- Taking jobs (the dequeue thread) -----------------------------------------------------

    def _dequeue_loop(self) -> None:
        assert self._loop is not None and self._stopping is not None
        backoff = Backoff()
        drained = False
        next_suspension_check = 0.0
        while not self._stop_dequeue.is_set():
            if not self._slots.acquire(timeout=0.5):
                continue
            # As many free slots as one batch may fill (see JobBook.take).
            slots = 1
            while slots < DEQUEUE_BATCH and self._slots.acquire(blocking=False):
                slots += 1
            handed = 0
            try:
                # `rq suspend`, checked once a second rather than per job (RQ checks per job; a
                # round trip per job adds up at hundreds of jobs a second).
                if time.monotonic() >= next_suspension_check:
                    next_suspension_check = time.monotonic() + SUSPENSION_CHECK_S
                    if self.book.suspended():
                        if self.burst:
                            log.info("workers are suspended (rq suspend): burst consumer exits")
                            drained = True
                            break
                        next_suspension_check = 0.0
                        self._stop_dequeue.wait(1.0)
                        continue
                # Read before dequeuing: a job finishing after this read has already enqueued
                # any successor, so an empty queue now means there is nothing left (burst).
                idle = self.active == 0
                began = time.monotonic()
                taken = self.book.take(slots, None if self.burst else DEQUEUE_BLOCK_S)
                if self.outage.recovered(began):
                    backoff.reset()
                if not taken:
                    if self.burst and idle:
                        drained = True
                        break
                    if self.burst:
                        self._stop_dequeue.wait(0.05)
                    continue
                with self._count_lock:
                    self._active += len(taken)
                self._loop.call_soon_threadsafe(self._start, taken)
                handed = len(taken)
            except REDIS_ERRORS as exc:
                self.outage.failed(exc)  # logged once per outage
                self._stop_dequeue.wait(backoff.next())
            except Exception:  # noqa: BLE001 - e.g. a job hash that does not deserialize
                log.exception("ai consumer %s: could not take a job from the queue", self.name)
                self._stop_dequeue.wait(1.0)
            finally:
                for _ in range(slots - handed):
                    self._slots.release()
        if drained:
            log.info("ai consumer %s: queue empty and nothing in flight, stopping (burst)", self.name)
            self._loop.call_soon_threadsafe(self._stopping.set)

    # --- Running jobs (the loop) ----------------------------------------------------------------

    def _start(self, taken: list[rq_adapter.Running]) -> None:
        step_jobs = [running for running in taken if running.job.func_name == dispatch.JOB_FUNC]
        # The steps of one dequeue round are claimed together: one statement where the store can.
        claims = (self.steps.claim_all([int(running.job.args[0]) for running in step_jobs])
                  if len(step_jobs) > 1 else None)
        for running in taken:
            job = InFlight(running, claims=claims)
            self._in_flight[running.execution.id] = job
            task = asyncio.create_task(self._run(job), name=f"job {running.job_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, job: InFlight) -> None:
        running = job.running
        end: dict[str, Any] = {}
        try:
            try:
                with rq_adapter.current_job(running.job):
                    end["return_value"] = await self.steps.perform(job)
            except CommitAbandoned:
                end["return_value"] = 0  # logged once per episode (runtime/loop.py); the lease takes it back
            except Exception as exc:  # noqa: BLE001 - the job's failure, recorded in RQ; we carry on
                end = {"exc_info": rq_adapter.exc_info_of(exc)}
            finally:
                # Out of the heartbeat set before it is finalised: a heartbeat after the job's
                # deletion would bring its hash back (docs/STACK_NOTES.md, "Many LLM calls", traps).
                self._in_flight.pop(running.execution.id, None)
            if job.released:
                end = {"released": RELEASE_REASON}
            await self._book(self.book.finalize, running, **end)
        finally:
            with self._count_lock:
                self._active -= 1
                idle = self._active == 0
            self._slots.release()
            self.jobs_done += 1
            if idle:
                # Truthful state for `rq info` without waiting for the next heartbeat.
                await self._quietly(self._book(self.book.set_idle), "worker state")

    # --- Periodic work --------------------------------------------------------------------------

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + self.monitoring_interval
        next_lease = loop.time() + self.lease_every_s
        while True:
            await asyncio.sleep(TICK_S)
            now = loop.time()
            try:
                if now >= next_beat:
                    next_beat = now + self.monitoring_interval
                    # The snapshot is taken and submitted in one step of the loop, so it is ordered
                    # before the finalisation of any job that leaves the set after it.
                    running = [job.running for job in self._in_flight.values()]
                    await self._quietly(self._book(self.book.heartbeat, running), "RQ heartbeat")
                if now >= next_lease:
                    next_lease = now + self.lease_every_s
                    claims = [job.claim for job in self._in_flight.values() if job.claim is not None]
                    if claims:
                        await self._quietly(self._in(self.db, _extend_leases, claims), "lease extension")
                if breakers.has_pending():
                    # Window counts this process aggregated (workflows/adapters/breakers.py): written when due.
                    await self._quietly(self._in(self.db, breakers.flush_due), "circuit breaker counts")
                if self.book.maintenance_due():
                    await self._quietly(self._book(self.book.maintain), "RQ maintenance")
                if not self._dequeuer.is_alive() and not self._stop_dequeue.is_set():
                    # Cannot happen short of a bug; a consumer that takes no jobs must not look alive.
                    log.error("ai consumer %s: the dequeue thread died; stopping", self.name)
                    self.exit_code = 1
                    assert self._stopping is not None
                    self._stopping.set()
            except Exception:  # noqa: BLE001 - the ticker must outlive any one failure
                log.exception("ai consumer %s: periodic work failed", self.name)

    # --- Stopping -------------------------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        assert self._stopping is not None
        name = signal.Signals(signum).name
        if not self._stopping.is_set():
            log.warning("ai consumer %s: %s, stopping: no new jobs; %d in flight get up to %g s to finish",
                        self.name, name, self.active, self.grace_s)
            self._stopping.set()
            note = asyncio.ensure_future(self._quietly(self._book(self.book.record_shutdown_requested),
                                                       "recording the shutdown request"))
            self._tasks.add(note)
            note.add_done_callback(self._tasks.discard)
        else:
            log.warning("ai consumer %s: %s again: giving in-flight steps back now", self.name, name)
            self._release_all()

    def _release_all(self) -> None:
        """Cancel the handler calls still running; their tasks release the steps and requeue the jobs.
        Synchronous handlers cannot be interrupted: they are waited for."""
        self._releasing = True
        cancelled = 0
        for job in list(self._in_flight.values()):
            if isinstance(job.handler, asyncio.Task) and not job.handler.done():
                job.handler.cancel()
                cancelled += 1
        if cancelled:
            log.warning("ai consumer %s: cancelled %d call(s) in flight; their steps go back to the queue",
                        self.name, cancelled)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace_s
        if self.active:
            log.info("ai consumer %s: waiting up to %g s for %d job(s) in flight", self.name, self.grace_s,
                     self.active)
        while self.active and loop.time() < deadline and not self._releasing:
            await asyncio.sleep(0.05)
        if not self.active:
            return
        self._release_all()
        deadline = loop.time() + RELEASE_WAIT_S
        while self.active and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if self.active:
            log.warning("ai consumer %s: %d job(s) still running at exit: their steps return through the "
                        "reconciler when their leases expire", self.name, self.active)

    # --- Plumbing -------------------------------------------------------------------------------

    def _in(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any,
            **kwargs: Any) -> asyncio.Future[T]:
        return in_pool(pool, fn, *args, **kwargs)

    def _book(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """Submit Redis bookkeeping now (submission order is execution order)."""
        return asyncio.wrap_future(self.bookkeeper.submit(fn, *args, **kwargs))

    async def _quietly(self, awaitable: Awaitable[Any], what: str) -> None:
        started = time.monotonic()
        try:
            await awaitable
        except REDIS_ERRORS as exc:
            self.outage.failed(exc)  # logged once per outage; the next tick retries
        except DatabaseError as exc:  # a crash, a full disk: once per episode, the next tick retries
            self.database.failed(what, exc, "the next tick tries again")
        except Exception:  # noqa: BLE001 - periodic work must not stop the consumer; next tick retries
            log.exception("ai consumer %s: %s failed", self.name, what)
        else:
            self.database.recovered(started)

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        log.error("ai consumer %s: %s", self.name, context.get("message"), exc_info=context.get("exception"))


def run_ai_worker(burst: bool = False, name: str | None = None, max_in_flight: int | None = None) -> None:
    """`manage.py run_worker ai`: consume the ai queue until stopped (or, with burst, until drained)."""
    status = AIConsumer(name=name, max_in_flight=max_in_flight, burst=burst).run()
    if status:
        raise SystemExit(status)
