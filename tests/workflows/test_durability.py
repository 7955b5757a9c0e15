"""Light durability checks with real workers: a repeated job changes nothing, a cancelled instance runs
nothing more, a step whose worker vanished is taken back by the scheduler, and the database refuses a
second result for one node visit. (Process kills, Redis loss and database faults are in tests/faults.)"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

import tests.workflows.functions  # noqa: F401 - registers tests.* functions in this process
from tests.conftest import chain
from tests.workflows.functions import EXTRA_FUNCTIONS_ENV, calls_so_far
from tests.workflows.support import (
    assert_history_consistent,
    edge,
    events,
    expect_status,
    py,
    steps,
    wait_for_workers,
)
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine.nodes import NodeResult
from workflows.models import Event, StepRun
from workflows.workers import dispatch

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker_env(worker_env: dict[str, str]) -> dict[str, str]:
    worker_env.update(EXTRA_FUNCTIONS_ENV)
    return worker_env


def snapshot(instance: Any) -> tuple[Any, ...]:
    """Everything a duplicate or late delivery must leave untouched."""
    instance.refresh_from_db()
    return (instance.status, instance.event_seq, instance.checkpoints.count(),
            [(s.pk, s.status, s.attempt, s.output) for s in steps(instance)])


def test_delivering_every_job_again_changes_nothing(processes, redis_conn):
    version = save_version("redeliver", chain(py("a", "tests.echo", args={"n": 1}), py("b", queue="io")))
    instance = runtime.start_instance(version, {})
    burst = processes.worker("default", "io", burst=True)
    assert burst.wait(timeout=60) == 0
    expect_status(instance, "completed", timeout=5)
    before = snapshot(instance)

    # Every step's job again (as a re-dispatch or a Redis replay would), plus one for a step that
    # does not exist: the claims fail and nothing is written.
    jobs = [(s.pk, s.queue) for s in steps(instance)] + [(10**9, "default")]
    assert dispatch.enqueue_steps(jobs) == len(jobs)
    again = processes.worker("default", "io", burst=True)
    assert again.wait(timeout=60) == 0, processes.logs()
    assert snapshot(instance) == before
    assert_history_consistent(instance)


def test_a_cancelled_instance_runs_nothing_more(processes, redis_conn):
    version = save_version("cancelled", chain(py("a"), py("b")))
    instance = runtime.start_instance(version, {})
    # The first step's job is on the queue; cancel before any worker takes it.
    assert runtime.cancel_instance(instance.pk, "changed my mind")
    burst = processes.worker("default", burst=True)
    assert burst.wait(timeout=60) == 0

    instance.refresh_from_db()
    assert instance.status == "cancelled" and instance.error == {"message": "changed my mind"}
    (a,) = steps(instance, "a")
    assert a.status == "cancelled" and a.attempt == 0 and a.worker == ""
    assert events(instance, "step_started") == []
    assert steps(instance, "b") == []
    assert [e.type for e in events(instance)][-2:] == ["step_cancelled", "instance_cancelled"]
    assert_history_consistent(instance)


def test_a_step_whose_worker_vanished_is_retried_and_the_late_result_is_discarded(processes, redis_conn):
    version = save_version("vanished", chain(py("work", "tests.echo", args={"by": "real worker"},
                                                retry={"max_attempts": 2, "backoff_s": 0.1})))
    instance = runtime.start_instance(version, {})
    (work,) = steps(instance, "work")
    # A "ghost" worker claims the step and is never heard from again: its lease ran out a minute ago.
    ghost = runtime.claim_step(work.pk, "ghost:1", now=timezone.now() - timedelta(minutes=2))
    assert ghost is not None
    processes.worker("default")
    processes.scheduler()

    expect_status(instance, "completed")
    work.refresh_from_db()
    assert work.attempt == 2 and work.output == {"by": "real worker"}
    assert work.worker != "ghost:1"
    (retry,) = events(instance, "step_retrying")
    assert retry.payload["error"]["code"] == "lease_expired"
    assert "ghost:1 stopped heartbeating" in retry.payload["error"]["message"]

    # The ghost wakes up and reports: its lease token is stale, so nothing commits.
    before = snapshot(instance)
    late = runtime.finish_step(ghost, runtime.Outcome(result=NodeResult(output={"by": "ghost"})))
    assert late is None
    assert snapshot(instance) == before
    assert_history_consistent(instance)


def test_a_batch_whose_steps_outlast_the_lease_runs_each_step_once(processes, redis_conn):
    """One worker takes a fan-out's two branches as one batch job and runs them one after another,
    each for longer than the lease: the step waiting for its turn, and the one run whose outcome
    waits for the other, keep their leases (the worker's heartbeat), so the scheduler takes back
    neither and no step runs twice."""
    lease = {"STEADYFLOW_LEASE_S": "3", "STEADYFLOW_SCHEDULER_INTERVAL_S": "0.5"}
    slow = {"seconds": 4.5}
    # A fan-out of a step a worker ran (a start's is enqueued step by step, with other instances').
    graph = {"nodes": [{"id": "start", "type": "start"}, py("first", "tests.echo"), py("a", "tests.sleep", args=slow),
                       py("b", "tests.sleep", args=slow), {"id": "end", "type": "end"}],
             "edges": [edge("start", "first"), edge("first", "a"), edge("first", "b"), edge("a", "end"),
                       edge("b", "end")]}
    version = save_version("batch-lease", graph)
    processes.worker("default", env=lease)
    processes.scheduler(env=lease)
    wait_for_workers(1)
    instance = runtime.start_instance(version, {})

    expect_status(instance, "completed", timeout=60)
    (a,) = steps(instance, "a")
    (b,) = steps(instance, "b")
    for step in (a, b):
        assert calls_so_far(step.idempotency_key) == 1, f"{step.node_id} ran more than once"
        assert (step.status, step.attempt) == ("succeeded", 1), (step.node_id, step.error)
    assert not events(instance, "step_retrying")
    # They were one batch: claimed together, by the one worker.
    assert (a.started_at, a.worker) == (b.started_at, b.worker)
    assert_history_consistent(instance)


def test_a_step_that_loses_its_worker_on_every_attempt_is_parked_for_review(processes, redis_conn):
    from workflows.models import ReviewItem

    version = save_version("poison", chain(py("work", "tests.echo")))
    instance = runtime.start_instance(version, {})
    (work,) = steps(instance, "work")
    assert runtime.claim_step(work.pk, "ghost:2", now=timezone.now() - timedelta(minutes=2)) is not None
    # One lost worker is presumed poison here (the default, 2, retries the first loss).
    processes.scheduler(env={"STEADYFLOW_POISON_AFTER_LOSSES": "1"})

    expect_status(instance, "halted")
    assert instance.halt_reason == "poison_step"
    assert instance.error["node"] == "work"
    assert instance.error["message"] == "step 'work' lost its worker on all 1 attempt(s)"
    (review,) = ReviewItem.objects.filter(instance=instance)
    assert review.reason == "poison_step" and review.node_id == "work"
    work.refresh_from_db()
    assert work.status == "pending" and work.lease_token == ""


def test_the_database_refuses_a_second_row_for_one_visit_or_seq(processes, redis_conn):
    version = save_version("unique", chain(py("a")))
    instance = runtime.start_instance(version, {})
    processes.worker("default")
    expect_status(instance, "completed")
    (a,) = steps(instance, "a")
    with pytest.raises(IntegrityError), transaction.atomic():
        StepRun.objects.create(instance=instance, node_id="a", node_type="python", visit=a.visit, queue="default",
                               idempotency_key=a.idempotency_key, trace_id=instance.trace_id)
    with pytest.raises(IntegrityError), transaction.atomic():
        Event.objects.create(instance=instance, seq=1, type="duplicate")
    assert instance.steps.count() == 3
    assert_history_consistent(instance)
