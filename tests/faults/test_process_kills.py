"""Processes die at the worst moments: a work horse mid-step, whole worker process groups mid-run,
a process right after its commit and before its enqueue, a worker frozen past its lease (a zombie).
Every instance must end as expected, each (instance, node, visit) with one committed outcome, the
event log without gaps, and each side effect applied once under its idempotency key."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

import tests.faults.functions  # noqa: F401 - registers faults.* functions in this process
from tests.conftest import ROOT, chain, wait_for
from tests.faults.conftest import (
    check_effects,
    check_history,
    children_of,
    full_logs,
    http,
    kill_group,
    new_version,
    py,
    record,
    start,
    statuses,
    step_of,
    wait_all,
)
from tests.faults.functions import CRASH_BEFORE_ENQUEUE_ENV
from tests.support.forkserver import python_run
from workflows.models import StepRun, WorkflowInstance

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_work_horse_sigkill_mid_step(processes, sink):
    """SIGKILL the forked work horse while its HTTP call is in flight: the worker survives, the step's
    lease expires, the reconciler retries it with the same idempotency key, the sink applies it once."""
    [instance] = start(chain(http("charge", sink, delay=1.0), http("notify", sink)))
    worker = processes.start("run_worker", "io", "--fork")
    processes.scheduler()
    key = f"{instance.pk}:charge:1"
    sink.wait_for_key(key)
    horses = wait_for(lambda: children_of(worker.pid), message="the work horse")
    killed_at = time.monotonic()
    for pid in horses:
        os.kill(pid, signal.SIGKILL)

    wait_all([instance], "completed")
    recovery = time.monotonic() - killed_at
    assert worker.poll() is None, "only the work horse was to die"
    history = check_history(instance)
    effects = check_effects(sink, [instance], exact=False)
    charge = step_of(instance, "charge")
    assert charge.attempt == 2 and sink.deliveries_of(key) == 2 and sink.effects[key] == 1
    assert instance.events.filter(type="step_retrying", node_id="charge",
                                  payload__error__code="lease_expired").count() == 1
    record("work horse SIGKILL mid-step", status=instance.status, steps=history.steps,
           attempts=history.attempts, **effects, recovery_s=round(recovery, 2))


def test_whole_worker_process_groups_sigkill_mid_run(processes, sink):
    """SIGKILL every worker's process group (a forking one with its horse, a simple one) and the
    scheduler while several instances run; start fresh ones: every instance completes."""
    graph = chain(http("a", sink, delay=0.4), http("b", sink, delay=0.4), http("c", sink))
    instances = start(graph, count=6)
    victims = [processes.start("run_worker", "io", "--fork"), processes.worker("io"), processes.scheduler()]
    steps = StepRun.objects.filter(instance__in=instances)
    wait_for(lambda: steps.filter(node_type="http", status="succeeded").count() >= 3
             and steps.filter(status="running").exists(), timeout=60, message="some steps done, some running")
    running = StepRun.objects.filter(instance__in=instances, status="running").count()
    killed_at = time.monotonic()
    for proc in victims:
        kill_group(proc)
    processes.worker("io")
    processes.worker("io")
    processes.scheduler()

    wait_all(instances, "completed")
    recovery = time.monotonic() - killed_at
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=False)
    assert effects["keys"] == 3 * len(instances)
    record("worker process groups SIGKILL mid-run", instances=len(instances), statuses=statuses(instances),
           running_when_killed=running, attempts=sum(h.attempts for h in histories),
           steps=sum(h.steps for h in histories), **effects, recovery_s=round(recovery, 2))


def test_crash_after_commit_before_enqueue(processes, sink, worker_env):
    """Two processes die between a commit and its enqueue: one starting an instance (API/CLI side),
    one worker finishing a step whose successor is on another queue. The database has the work; the
    reconciler enqueues it; no handler runs twice."""
    processes.worker("io")
    processes.scheduler()
    # 1. The starter: commits the instance and its first step, dies before the job reaches Redis.
    version = new_version(chain(http("first", sink), http("second", sink)))
    code = (f"from workflows import runtime; from workflows.models import WorkflowVersion; "
            f"runtime.start_instance(WorkflowVersion.objects.get(pk={version.pk}), {{}}, "
            f"idempotency_key='crash-before-enqueue')")
    starter = python_run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT,
                             env={**worker_env, CRASH_BEFORE_ENQUEUE_ENV: "1"}, capture_output=True,
                             timeout=60)
    crashed_at = time.monotonic()
    assert starter.returncode == -signal.SIGKILL, starter.stderr.decode()
    started = WorkflowInstance.objects.get(idempotency_key="crash-before-enqueue")
    assert started.status == "running"
    # Committed before the crash (and maybe already recovered by the running reconciler and worker).
    assert step_of(started, "first").status in ("queued", "running", "succeeded")

    # 2. A worker: finishes `a` (default queue), commits, dies before enqueuing `b` (io queue).
    [second] = start(chain(py("a", "faults.effect", {"sink": sink.url()}), http("b", sink)))
    crashing = processes.worker("default", env={CRASH_BEFORE_ENQUEUE_ENV: "1"})
    assert crashing.wait(timeout=60) == -signal.SIGKILL
    worker_crashed_at = time.monotonic()
    assert step_of(second, "a").status == "succeeded"
    assert step_of(second, "b").status in ("queued", "running", "succeeded")

    wait_all([started, second], "completed")
    done = time.monotonic()
    histories = [check_history(i) for i in (started, second)]
    effects = check_effects(sink, [started, second], exact=True)
    http_steps = StepRun.objects.filter(instance__in=[started, second], node_type="http")
    assert all(s.attempt == 1 for s in http_steps)
    assert step_of(second, "a").attempt == 1
    record("crash after commit before enqueue", statuses=statuses([started, second]),
           steps=sum(h.steps for h in histories), **effects,
           recovery_starter_s=round(done - crashed_at, 2),
           recovery_worker_s=round(done - worker_crashed_at, 2))


def test_zombie_worker_frozen_past_its_lease_commits_nothing(processes, sink):
    """SIGSTOP the worker mid-step until its lease expires: the step is retried on another worker and
    completes. SIGCONT: the zombie finishes its handler late, finds its lease gone and commits nothing."""
    [instance] = start(chain(http("pay", sink, delay=0.5)))
    first = processes.worker("io")
    key = f"{instance.pk}:pay:1"
    sink.wait_for_key(key)
    pay = step_of(instance, "pay")
    assert pay.worker.endswith(f":{first.pid}")
    os.kill(first.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        processes.worker("io")
        processes.scheduler()
        wait_all([instance], "completed")
        recovery = time.monotonic() - frozen_at
        seq_before = WorkflowInstance.objects.get(pk=instance.pk).event_seq
    finally:
        os.kill(first.pid, signal.SIGCONT)
    wait_for(lambda: "lease lost, outcome discarded" in full_logs(processes), timeout=30,
             message="the zombie to finish and discard its outcome")

    instance.refresh_from_db()
    assert instance.event_seq == seq_before, "the zombie committed something"
    assert first.poll() is None, "the zombie worker carries on serving jobs"
    history = check_history(instance)
    effects = check_effects(sink, [instance], exact=False)
    pay.refresh_from_db()
    assert pay.attempt == 2 and not pay.worker.endswith(f":{first.pid}")
    assert sink.deliveries_of(key) == 2 and sink.effects[key] == 1
    record("zombie worker (SIGSTOP past lease, then SIGCONT)", status=instance.status, steps=history.steps,
           **effects, recovery_s=round(recovery, 2))
