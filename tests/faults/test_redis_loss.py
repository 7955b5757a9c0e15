"""Redis loses the queues (FLUSHALL mid-run), is down when an instance starts, delivers the same step
twice, or holds a job that a dead worker took. The database says what is due: nothing is lost, no
handler runs twice. Each test has its own redis-server (private_redis), so stopping or flushing it
disturbs nobody else."""

from __future__ import annotations

import time

import pytest

import tests.faults.functions  # noqa: F401 - registers faults.* functions in this process
from tests.conftest import chain, wait_for
from tests.faults.conftest import (
    check_effects,
    check_history,
    full_logs,
    http,
    record,
    start,
    statuses,
    step_of,
    wait_all,
)
from workflows.models import StepRun, WorkflowInstance
from workflows.workers import dispatch

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_redis_flushall_mid_run(processes, sink, private_redis):
    """FLUSHALL while instances run: queued jobs, registries and worker keys vanish. The reconciler
    re-enqueues what the database says is queued; steps in flight finish and commit normally."""
    graph = chain(http("a", sink, delay=0.3), http("b", sink, delay=0.3), http("c", sink, delay=0.3))
    instances = start(graph, count=6)
    processes.worker("io")
    processes.worker("io")
    processes.scheduler()
    steps = StepRun.objects.filter(instance__in=instances)
    wait_for(lambda: steps.filter(node_type="http", status="succeeded").count() >= 4, timeout=60,
             message="some steps done")
    queued_before = private_redis.client().llen("rq:queue:io")
    private_redis.client().flushall()
    flushed_at = time.monotonic()
    lost = StepRun.objects.filter(instance__in=instances, status="queued").count()

    wait_all(instances, "completed")
    recovery = time.monotonic() - flushed_at
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=True)
    assert effects["keys"] == 3 * len(instances)
    record("Redis FLUSHALL mid-run", instances=len(instances), statuses=statuses(instances),
           jobs_flushed=queued_before, steps_queued_at_flush=lost, steps=sum(h.steps for h in histories),
           **effects, recovery_s=round(recovery, 2))


def test_redis_down_when_an_instance_starts(processes, sink, private_redis):
    """With Redis stopped, starting instances still commits them (the enqueue failure is logged, not
    raised); the work runs once Redis is back."""
    processes.worker("io")
    processes.scheduler()
    # The worker is up first here; one started while Redis is down waits for it (test_redis_outage.py).
    wait_for(lambda: private_redis.client().scard("rq:workers"), message="the worker to register")
    private_redis.stop()
    began = time.monotonic()
    instances = start(chain(http("a", sink), http("b", sink)), count=3)
    start_s = time.monotonic() - began
    for instance in instances:
        instance.refresh_from_db()
        assert instance.status == "running"
        assert step_of(instance, "a").status == "queued"
        types = list(instance.events.values_list("type", flat=True))
        assert types[:2] == ["instance_started", "step_succeeded"]
    # Nothing can run while Redis is away (workers and scheduler keep retrying their connections).
    time.sleep(1.5)
    assert StepRun.objects.filter(instance__in=instances, node_id="a", status="queued").count() == 3
    assert sink.keys() == set()

    private_redis.start()
    back_at = time.monotonic()
    wait_all(instances, "completed")
    recovery = time.monotonic() - back_at
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=True)
    record("Redis stopped when instances start", instances=len(instances), statuses=statuses(instances),
           start_while_down_s=round(start_s, 3), steps=sum(h.steps for h in histories), **effects,
           recovery_after_redis_back_s=round(recovery, 2))


def test_duplicate_delivery_of_a_step_to_two_workers(processes, sink, private_redis):
    """The same step's job is on the queue three times and two workers take copies: one claims it,
    the others find it taken and do nothing. A late duplicate after completion changes nothing."""
    import django_rq
    from rq.job import Job

    [instance] = start(chain(http("once", sink, delay=0.3), http("after", sink)))
    once = step_of(instance, "once")
    queue = django_rq.get_queue("io")
    job = Job.fetch(dispatch.job_id_for(once.pk), connection=queue.connection)
    # Jobs carry the step id only: inputs, outputs and context stay in the database.
    assert job.func_name == dispatch.JOB_FUNC and job.args == (once.pk,) and job.kwargs == {}
    for _ in range(2):
        queue.push_job_id(job.id)
    assert queue.get_job_ids() == [job.id] * 3

    processes.worker("io")
    processes.worker("io")
    processes.scheduler()
    wait_all([instance], "completed")
    wait_for(lambda: queue.count == 0, message="the duplicate copies to be consumed")
    seq = WorkflowInstance.objects.get(pk=instance.pk).event_seq

    # A late duplicate of a finished step: claimed by nobody, nothing committed.
    dispatch.enqueue_steps([(once.pk, "io")])
    # Consumed when its job hash is gone: jobs keep no result (result_ttl=0).
    wait_for(lambda: queue.count == 0 and not queue.connection.exists(job.key),
             message="the late duplicate to be consumed")
    instance.refresh_from_db()
    assert instance.event_seq == seq
    history = check_history(instance)
    effects = check_effects(sink, [instance], exact=True)
    once.refresh_from_db()
    assert once.attempt == 1
    assert instance.events.filter(type="step_started", node_id="once").count() == 1
    # Two workers finishing copies of one job at once can trip RQ's own bookkeeping (the first deletes
    # the job hash the second then cleans up); RQ logs it, the workers carry on, the database is right.
    rq_errors = full_logs(processes).count("exception raised while executing")
    record("duplicate delivery to two workers (+1 late)", status=instance.status, copies_delivered=4,
           steps=history.steps, **effects, rq_bookkeeping_errors=rq_errors)


def test_jobs_taken_by_a_worker_that_died_before_starting_them(processes, sink, private_redis):
    """A worker pops a job and dies before starting it: the job stays QUEUED in RQ's intermediate list
    (single-queue worker) or nowhere (multi-queue worker), or it is marked STARTED by a worker that
    died before its claim. RQ's own cleanup takes minutes; the reconciler re-enqueues all three."""
    import django_rq
    from rq.job import Job, JobStatus

    instances = start(chain(http("a", sink)), count=3)
    queue = django_rq.get_queue("io")
    conn = queue.connection
    ids = queue.get_job_ids()
    assert len(ids) == 3
    # 1. Popped into the intermediate list, exactly as Queue.dequeue_any's LMOVE does.
    conn.lmove(queue.key, queue.intermediate_queue_key)
    # 2. Popped by a multi-queue worker's BLPOP: in no list at all.
    conn.lpop(queue.key)
    # 3. Popped and marked started by a worker that died before claiming the step.
    started_id = conn.lpop(queue.key).decode()
    started = Job.fetch(started_id, connection=conn)
    started.set_status(JobStatus.STARTED)
    conn.hset(started.key, "started_at", "2000-01-01T00:00:00.000000Z")
    assert queue.count == 0
    assert {Job.fetch(i, connection=conn).get_status() for i in ids} == {JobStatus.QUEUED, JobStatus.STARTED}

    lost_at = time.monotonic()
    processes.worker("io")
    processes.scheduler()
    wait_all(instances, "completed")
    recovery = time.monotonic() - lost_at
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=True)
    record("jobs popped by a worker that died before starting them", instances=len(instances),
           statuses=statuses(instances), steps=sum(h.steps for h in histories), **effects,
           recovery_s=round(recovery, 2))
