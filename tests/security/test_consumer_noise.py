"""Issue 19, item 16: the ai consumer's expected "could not record its end in Redis" cases (a job
whose Redis data was lost, or whose step was taken back meanwhile) are one info/warning line each, not
ERROR tracebacks, so that the real errors page someone."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from rq import Queue

from workflows.workers import rq_adapter

QUEUE = "noise-test"


@pytest.fixture
def book(redis_conn: Any) -> Any:
    book = rq_adapter.JobBook(QUEUE, redis_conn, name="noise-worker", monitoring_interval=5)
    book.bootstrap()
    yield book
    book.teardown()


@pytest.mark.parametrize("lost", ["job", "job_and_execution", "everything"])
@pytest.mark.parametrize("ending", ["success", "failure"])
def test_a_job_whose_redis_data_went_away_is_one_quiet_line(book: Any, redis_conn: Any, lost: str, ending: str,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    Queue(QUEUE, connection=redis_conn).enqueue("workflows.workers.dispatch.job_id_for", 1, result_ttl=0)
    running = book.dequeue(timeout=1)
    if lost == "everything":
        redis_conn.flushdb()
    else:
        redis_conn.delete(running.job.key)
        if lost == "job_and_execution":
            redis_conn.delete(running.execution.key)
    with caplog.at_level(logging.DEBUG, logger="steadyflow"):
        if ending == "success":
            book.finalize(running, return_value=1)
        else:
            try:
                raise ValueError("the step failed")
            except ValueError as exc:
                book.finalize(running, exc_info=rq_adapter.exc_info_of(exc))
    # (RQ's own line for a failing job is the job's failure, an error by right: not looked at here.)
    mine = [r for r in caplog.records if r.name.startswith("steadyflow")
            and ("could not record its end" in r.getMessage() or r.levelno >= logging.ERROR)]
    assert all(r.levelno < logging.ERROR and r.exc_info is None for r in mine), [
        (r.levelname, r.getMessage(), r.exc_info and r.exc_info[1]) for r in mine]
    assert len([r for r in mine if r.levelno >= logging.INFO]) <= 1
    assert book.worker.executions == {}
