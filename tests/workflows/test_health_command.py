"""`manage.py health`: exit 0 and OK when healthy; exit 1 naming stuck instances or an unreachable
database or Redis. `manage.py reconcile`: one tick, reported as JSON.

These tests are about the instances; the checks of live processes and queues (test_health_roles.py)
are left out, since no worker runs here."""

from __future__ import annotations

import io
import json
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from tests.conftest import ROOT, chain, database_url_for_tests
from tests.support.forkserver import python_run
from workflows.models import StepRun, WorkflowInstance

GRAPH = chain({"id": "a", "type": "python", "config": {"function": "examples.canned_reply"}})


# No worker or scheduler runs in these tests, and other tests may leave jobs on the queues.
WITHOUT_PROCESSES = ("--skip", "workers", "--skip", "scheduler", "--skip", "queues")


def health(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("health", *WITHOUT_PROCESSES, *args, stdout=out, stderr=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def queued_since(**ago: float) -> dict[str, Any]:
    return {"status": "queued", "due_at": timezone.now() - timedelta(**ago)}


@pytest.fixture
def version(make_version: Any) -> Any:
    return make_version(GRAPH)


def make_instance(version: Any, *, status: str = "running", idle_s: float = 600,
                  steps: list[dict[str, Any]] | None = None) -> WorkflowInstance:
    """An instance whose last transition was `idle_s` ago, with the given open steps."""
    now = timezone.now()
    at = now - timedelta(seconds=idle_s)
    inst = WorkflowInstance.objects.create(version=version, status=status, max_transitions=10, created_at=at,
                                           updated_at=at, open_steps=len(steps or []))
    for visit, spec in enumerate(steps or [], start=1):
        StepRun.objects.create(instance=inst, node_id="a", node_type="python", visit=visit, queue="default",
                               idempotency_key=f"{inst.pk}:a:{visit}", trace_id=inst.trace_id, created_at=at,
                               **spec)
    # updated_at has default=timezone.now and create() keeps what we passed; make sure of it.
    WorkflowInstance.objects.filter(pk=inst.pk).update(updated_at=at)
    return inst


@pytest.mark.django_db
def test_health_is_ok_when_nothing_is_stuck(version: Any) -> None:
    now = timezone.now()
    make_instance(version, idle_s=5, steps=[{"status": "queued", "due_at": now}])  # recent progress
    make_instance(version, status="completed")
    code, output = health("--threshold", "60")
    assert code == 0, output
    assert output.startswith("OK")


@pytest.mark.django_db
def test_health_names_stuck_instances_and_not_waiting_ones(version: Any) -> None:
    now = timezone.now()
    old = now - timedelta(seconds=600)
    queued = make_instance(version, steps=[{"status": "queued", "due_at": old}])
    dead_worker = make_instance(version, steps=[{"status": "running", "worker": "host:4242",
                                                 "started_at": old, "heartbeat_at": old, "lease_until": old}])
    nothing_open = make_instance(version)
    retry_overdue = make_instance(version, steps=[{"status": "retrying", "due_at": old, "attempt": 1}])
    # Idle too, but legitimately: a person's task, a timer not yet due, a live heartbeat, a halt.
    human = make_instance(version, status="waiting", steps=[{"status": "pending", "due_at": None}])
    timer = make_instance(version, steps=[{"status": "pending", "due_at": now + timedelta(hours=1)}])
    alive = make_instance(version, steps=[{"status": "running", "started_at": old, "heartbeat_at": now}])
    halted = make_instance(version, status="halted", steps=[{"status": "pending", "due_at": None}])
    finished = make_instance(version, status="failed")

    code, output = health("--threshold", "60")
    assert code == 1
    assert "4 stuck instance(s): no progress for more than 60 s" in output
    named = {int(line.split()[1]) for line in output.splitlines() if line.strip().startswith("instance ")}
    assert named == {queued.pk, dead_worker.pk, nothing_open.pk, retry_overdue.pk}
    assert not named & {human.pk, timer.pk, alive.pk, halted.pk, finished.pk}
    assert "is running on host:4242 without a heartbeat" in output
    assert "has no open step" in output

    # A larger threshold forgives all of them.
    assert health("--threshold", "3600")[0] == 0


@pytest.mark.django_db
def test_health_json(version: Any) -> None:
    stuck = make_instance(version, steps=[queued_since(hours=1)])
    code, output = health("--threshold", "60", "--json")
    assert code == 1
    result = json.loads(output)
    assert result["ok"] is False and result["database"] == "ok" and result["redis"] == "ok"
    assert result["stuck_count"] == 1
    assert result["stuck"][0]["id"] == stuck.pk
    assert result["stuck"][0]["steps"][0]["node"] == "a"


@pytest.mark.django_db
def test_health_default_threshold_is_the_setting(version: Any, settings: Any) -> None:
    make_instance(version, idle_s=120, steps=[queued_since(seconds=120)])
    assert health()[0] == 0  # default 300 s
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STUCK_AFTER_S": 60.0}
    assert health()[0] == 1


@pytest.mark.django_db
def test_health_reports_unreachable_redis() -> None:
    with override_settings(REDIS_URL="redis://127.0.0.1:1/0"):
        code, output = health()
    assert code == 1
    assert "redis: unreachable at redis://127.0.0.1:1/0" in output


def test_health_exit_code_from_the_command_line_when_the_database_is_down() -> None:
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": "postgres://postgres@127.0.0.1:1/steadyflow_nowhere",
           "REDIS_URL": "redis://127.0.0.1:1/0", "STEADYFLOW_VAR_DIR": "/tmp",
           # A liveness probe runs with the production settings, which need a SECRET_KEY and a
           # credentials key.
           "SECRET_KEY": "health-probe-test-" + "k" * 40,
           "STEADYFLOW_CREDENTIALS_KEY": "km3DmfDJlycJ07W3yCOQ55jBJBO8uMhCDe5Z05tMt00="}
    result = python_run([sys.executable, "manage.py", "health"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "database: unreachable" in result.stdout
    assert "redis: unreachable" in result.stdout


@pytest.mark.django_db(transaction=True)
def test_health_exit_code_from_the_command_line(version: Any, worker_env: dict[str, str]) -> None:
    stuck = make_instance(version, steps=[queued_since(hours=1)])
    env = {**worker_env, "DATABASE_URL": database_url_for_tests()}
    result = python_run([sys.executable, "manage.py", "health", *WITHOUT_PROCESSES, "--threshold", "60"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"instance {stuck.pk} " in result.stdout
    WorkflowInstance.objects.filter(pk=stuck.pk).update(status="cancelled")
    result = python_run([sys.executable, "manage.py", "health", *WITHOUT_PROCESSES, "--threshold", "60"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK")


@pytest.mark.django_db
def test_reconcile_prints_what_one_tick_did(version: Any, redis_conn: Any) -> None:
    """A step queued in the database but on no queue (Redis lost it) is re-enqueued by one tick."""
    import django_rq

    old = timezone.now() - timedelta(seconds=60)
    inst = make_instance(version, steps=[{"status": "queued", "due_at": old}])
    out = io.StringIO()
    call_command("reconcile", stdout=out)
    result = json.loads(out.getvalue())
    assert result["redispatched"] == 1
    assert {"promoted", "reclaimed", "expired", "duration_ms"} <= set(result)
    step = inst.steps.get()
    assert django_rq.get_queue("default").get_job_ids() == [f"step-{step.pk}"]
    # Long overdue again, but its job is on the queue now: nothing is re-enqueued.
    StepRun.objects.filter(pk=step.pk).update(due_at=old)
    out = io.StringIO()
    call_command("reconcile", stdout=out)
    assert json.loads(out.getvalue())["redispatched"] == 0
