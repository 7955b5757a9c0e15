"""workflows/workers/rq_adapter.py against real Redis: the RQ side of the ai consumer, one call at a time.

The first test is the canary for an RQ upgrade: it fails when a private hook the adapter relies on
is gone or changed its signature."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import time
from typing import Any

import pytest
import rq
from rq import Queue, get_current_job
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry
from rq.worker import BaseWorker

from workflows.workers import dispatch, rq_adapter

QUEUE = "adapter-test"


@pytest.fixture
def book(redis_conn: Any) -> Any:
    book = rq_adapter.JobBook(QUEUE, redis_conn, name="adapter-worker", monitoring_interval=5)
    book.bootstrap()
    yield book
    book.teardown()


def enqueue(conn: Any, *args: Any, func: str = "workflows.workers.dispatch.job_id_for", **options: Any) -> Job:
    return Queue(QUEUE, connection=conn).enqueue(func, *args, **options)


def started(conn: Any) -> StartedJobRegistry:
    return StartedJobRegistry(QUEUE, connection=conn)


def executions_of(book: Any) -> set[bytes]:
    return book.connection.smembers(book.worker.executions_key)


def test_rq_private_hooks_are_there():
    assert rq.VERSION.startswith("3.0.")
    params = list(inspect.signature(BaseWorker._finalize_success).parameters)
    assert params == ["self", "job", "queue", "execution", "return_value"]
    params = list(inspect.signature(BaseWorker._finalize_failure).parameters)
    assert params == ["self", "job", "queue", "execution", "exc_info"]
    from rq.job import _current_job

    assert isinstance(_current_job, contextvars.ContextVar)
    assert "_shutdown_requested_date" in inspect.getsource(BaseWorker.set_shutdown_requested_date)


def test_a_started_job_is_executing_in_rq_and_out_of_the_intermediate_list(book, redis_conn):
    job = enqueue(redis_conn, 5)
    running = book.dequeue(timeout=1)
    assert running is not None and running.job_id == job.id
    assert job.id in started(redis_conn).get_job_ids(cleanup=False)
    assert book.intermediate_job_ids() == []
    assert Job.fetch(job.id, connection=redis_conn).get_status() == JobStatus.STARTED
    assert executions_of(book) == {running.execution.composite_key.encode()}
    assert redis_conn.hget(book.worker.key, "state") == b"busy"
    # What `rq info` prints as executing.
    assert Queue(QUEUE, connection=redis_conn).started_job_registry.count == 1


def test_take_starts_what_is_queued_in_one_go_up_to_the_limit(book, redis_conn):
    jobs = [enqueue(redis_conn, n) for n in range(5)]
    taken = book.take(3, timeout=1)
    assert [r.job_id for r in taken] == [j.id for j in jobs[:3]]
    assert set(started(redis_conn).get_job_ids(cleanup=False)) == {j.id for j in jobs[:3]}
    assert Queue(QUEUE, connection=redis_conn).get_job_ids() == [j.id for j in jobs[3:]]
    assert book.intermediate_job_ids() == []
    assert len(executions_of(book)) == 3
    rest = book.take(10, timeout=1)
    assert [r.job_id for r in rest] == [j.id for j in jobs[3:]]
    assert book.take(10, timeout=None) == []


def test_take_drops_ids_whose_job_is_gone(book, redis_conn):
    jobs = [enqueue(redis_conn, n) for n in range(3)]
    redis_conn.delete(jobs[1].key)  # deleted behind RQ's back, its id still queued
    taken = book.take(3, timeout=1)
    assert [r.job_id for r in taken] == [jobs[0].id, jobs[2].id]
    assert book.intermediate_job_ids() == []


def test_starting_in_a_batch_writes_what_rqs_own_preparation_writes(book, redis_conn):
    """start_all repeats prepare_execution + prepare_job_execution for many jobs in one transaction;
    the Redis state must be the same as RQ's own calls leave (this is the drift check on upgrade)."""
    ours, theirs = enqueue(redis_conn, 1), enqueue(redis_conn, 2)
    [running] = book.take(1, timeout=1)
    assert running.job_id == ours.id
    job, queue = Queue.dequeue_any([book.queue], 1, connection=redis_conn)
    assert job.id == theirs.id
    execution = book.worker.prepare_execution(job)
    book.worker.prepare_job_execution(job, remove_from_intermediate_queue=True)

    def state(job_id: str, execution_key: str, execution_id: str) -> dict[str, Any]:
        fields = {k.decode(): v for k, v in redis_conn.hgetall(f"rq:job:{job_id}").items()}
        exec_fields = {k.decode() for k in redis_conn.hgetall(execution_key)}
        return {
            "job_fields": set(fields), "status": fields["status"], "worker": fields["worker_name"],
            "heartbeat_at_start": fields["last_heartbeat"] == fields["started_at"],
            "job_ttl": redis_conn.ttl(f"rq:job:{job_id}"),
            "execution_fields": exec_fields, "execution_ttl_set": redis_conn.ttl(execution_key) > 0,
            "in_started": any(m.decode().startswith(job_id + ":")
                              for m in redis_conn.zrange(started(redis_conn).key, 0, -1)),
            "in_executions": redis_conn.zscore(f"rq:executions:{job_id}", execution_id) is not None,
            "in_worker_index": redis_conn.sismember(book.worker.executions_key, f"{job_id}:{execution_id}"),
        }

    assert state(ours.id, running.execution.key, running.execution.id) == \
        state(theirs.id, execution.key, execution.id)
    assert book.intermediate_job_ids() == []
    assert set(book.worker.executions) == {running.execution.id, execution.id}


def test_dequeue_returns_none_on_an_empty_queue(book):
    assert book.dequeue(timeout=None) is None
    began = time.monotonic()
    assert book.dequeue(timeout=1) is None
    assert time.monotonic() - began >= 0.9


def test_success_records_the_result_and_leaves_nothing_running(book, redis_conn):
    job = enqueue(redis_conn, 7, result_ttl=600)
    running = book.dequeue(timeout=1)
    book.finalize(running, return_value="step-7")
    assert started(redis_conn).get_job_count(cleanup=False) == 0
    assert executions_of(book) == set()
    assert job.id in FinishedJobRegistry(QUEUE, connection=redis_conn).get_job_ids()
    assert Job.fetch(job.id, connection=redis_conn).return_value() == "step-7"
    assert redis_conn.hget(book.worker.key, "successful_job_count") == b"1"
    assert book.worker.executions == {}


def test_success_with_result_ttl_zero_deletes_the_job_like_step_jobs(book, redis_conn):
    dispatch_job = Queue.prepare_data(dispatch.JOB_FUNC, args=(1,), job_id="step-1", timeout=-1,
                                      result_ttl=0, failure_ttl=86400)
    Queue(QUEUE, connection=redis_conn).enqueue_many([dispatch_job])
    running = book.dequeue(timeout=1)
    assert running.job_id == "step-1"
    book.finalize(running, return_value=1)
    assert not redis_conn.exists("rq:job:step-1")
    assert started(redis_conn).get_job_count(cleanup=False) == 0


def test_failure_goes_to_the_failed_registry_with_its_traceback(book, redis_conn):
    job = enqueue(redis_conn, 3)
    running = book.dequeue(timeout=1)
    try:
        raise ValueError("the step id is not a number")
    except ValueError as exc:
        book.finalize(running, exc_info=rq_adapter.exc_info_of(exc))
    assert started(redis_conn).get_job_count(cleanup=False) == 0
    assert job.id in FailedJobRegistry(QUEUE, connection=redis_conn).get_job_ids()
    fetched = Job.fetch(job.id, connection=redis_conn)
    assert fetched.get_status() == JobStatus.FAILED
    assert "ValueError: the step id is not a number" in fetched.latest_result().exc_string
    assert redis_conn.hget(book.worker.key, "failed_job_count") == b"1"


def test_requeue_puts_the_job_back_at_the_front_unfailed(book, redis_conn):
    first = enqueue(redis_conn, 1)
    second = enqueue(redis_conn, 2)
    running = book.dequeue(timeout=1)
    assert running.job_id == first.id
    book.finalize(running, released="stopping")
    assert started(redis_conn).get_job_count(cleanup=False) == 0
    assert executions_of(book) == set()
    assert Queue(QUEUE, connection=redis_conn).get_job_ids() == [first.id, second.id]
    fetched = Job.fetch(first.id, connection=redis_conn)
    assert fetched.get_status() == JobStatus.QUEUED and fetched.started_at is None
    assert FailedJobRegistry(QUEUE, connection=redis_conn).get_job_count(cleanup=False) == 0
    again = book.dequeue(timeout=1)
    assert again.job_id == first.id
    book.finalize(again, return_value="step-1")
    assert Job.fetch(first.id, connection=redis_conn).return_value() == "step-1"


def test_heartbeat_refreshes_every_running_job_in_one_go(book, redis_conn):
    jobs = [enqueue(redis_conn, n) for n in range(3)]
    running = [book.dequeue(timeout=1) for _ in jobs]
    before = {r.job_id: redis_conn.hget(r.job.key, "last_heartbeat") for r in running}
    executions_before = {r.job_id: redis_conn.hget(r.execution.key, "last_heartbeat") for r in running}
    time.sleep(0.01)
    book.heartbeat(running)
    for r in running:
        assert redis_conn.hget(r.job.key, "last_heartbeat") != before[r.job_id]
        assert redis_conn.hget(r.execution.key, "last_heartbeat") != executions_before[r.job_id]
        assert redis_conn.ttl(r.execution.key) > 60
    # The started registry's scores (when RQ would call them abandoned) lie beyond now + interval.
    scores = dict(redis_conn.zrange(started(redis_conn).key, 0, -1, withscores=True))
    assert len(scores) == 3 and min(scores.values()) > time.time() + 60
    assert redis_conn.ttl(book.worker.key) > 60
    assert redis_conn.hget(book.worker.key, "state") == b"busy"
    book.heartbeat([])
    assert redis_conn.hget(book.worker.key, "state") == b"idle"


def test_a_late_heartbeat_does_not_resurrect_a_deleted_job(book, redis_conn):
    """The trap the consumer avoids by ordering: if a heartbeat still lists a job already finalised
    (result_ttl=0, hash deleted), the stub it would create is removed again."""
    job = enqueue(redis_conn, 4, result_ttl=0)
    running = book.dequeue(timeout=1)
    book.finalize(running, return_value="step-4")
    assert not redis_conn.exists(job.key)
    book.heartbeat([running])
    assert not redis_conn.exists(job.key)


def test_maintenance_runs_and_is_then_not_due(book):
    assert book.maintenance_due()
    book.maintain()
    assert not book.maintenance_due()


def test_shutdown_request_and_death_are_recorded(book, redis_conn):
    book.record_shutdown_requested()
    assert redis_conn.hexists(book.worker.key, "shutdown_requested_date")
    assert book.worker.key.encode() in redis_conn.smembers("rq:workers")
    book.teardown()
    assert book.worker.key.encode() not in redis_conn.smembers("rq:workers")
    assert redis_conn.hexists(book.worker.key, "death")
    book.bootstrap()  # the fixture tears down again


def test_suspension_is_seen(book, redis_conn):
    from rq.suspension import resume, suspend

    assert not book.suspended()
    suspend(redis_conn)
    try:
        assert book.suspended()
    finally:
        resume(redis_conn)


def test_current_job_is_per_task(redis_conn):
    jobs = [enqueue(redis_conn, n) for n in range(2)]

    async def inside(job: Job) -> Job | None:
        with rq_adapter.current_job(job):
            await asyncio.sleep(0.01)  # the other task runs meanwhile
            return get_current_job()

    async def both() -> list[Job | None]:
        return list(await asyncio.gather(*(inside(job) for job in jobs)))

    seen = asyncio.run(both())
    assert [j.id for j in seen if j] == [j.id for j in jobs]
    assert get_current_job() is None
