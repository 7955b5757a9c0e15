"""`manage.py health --role web|worker|scheduler|all` (the containers' health checks) and `/healthz`,
against the real database and Redis, with real worker and scheduler processes started and killed."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import patch

import pytest
from django.core.management import call_command
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings

from tests.conftest import ROOT, Processes, wait_for
from tests.support.forkserver import python_run

CLOSED_PORT = "redis://127.0.0.1:1/0"


def health(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("health", *args, stdout=out, stderr=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def healthy(*args: str) -> bool:
    return health(*args)[0] == 0


def killed(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL: no clean shutdown, so the worker's registration (or the scheduler's heartbeat) stays."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.django_db
def test_web_role_checks_database_redis_and_migrations(redis_conn: Any) -> None:
    code, output = health("--role", "web")
    assert code == 0, output
    assert output.strip() == "OK (web): database, redis, migrations"
    # A migration recorded as not applied (rolled back with the test's transaction).
    MigrationRecorder.Migration.objects.filter(app="workflows").order_by("-id")[:1].get().delete()
    code, output = health("--role", "web", "--json")
    assert code == 1
    result = json.loads(output)
    assert result["checks"]["database"] == "ok" and result["checks"]["redis"] == "ok"
    assert "1 not applied (workflows." in result["checks"]["migrations"]
    assert "run manage.py migrate" in result["checks"]["migrations"]


@pytest.mark.django_db
def test_healthz_runs_the_web_checks_and_names_only_the_failing_ones(client: Any, redis_conn: Any) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "checks": ["database", "redis", "migrations"]}
    with override_settings(REDIS_URL="redis://:sekrit-password@127.0.0.1:1/0"):
        response = client.get("/healthz")
    # Redis alone down: degraded, not out of the load balancer (public: no details, no URL).
    assert response.status_code == 200
    assert response.json() == {"ok": True, "degraded": ["redis"], "checks": ["database", "migrations"]}
    with patch("workflows.operators.health.check_migrations", return_value="1 not applied"), \
            override_settings(REDIS_URL="redis://:sekrit-password@127.0.0.1:1/0"):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"ok": False, "failing": ["migrations", "redis"]}


@pytest.mark.django_db
def test_redis_down_fails_every_role_naming_redis_without_its_password() -> None:
    for role in ("web", "worker", "scheduler", "all"):
        with override_settings(REDIS_URL="redis://:sekrit-password@127.0.0.1:1/0"):
            code, output = health("--role", role)
        assert code == 1, (role, output)
        assert output.startswith("redis: unreachable at redis://:***@127.0.0.1:1/0"), output
        assert "sekrit" not in output
        if role != "web":
            assert "not checked: Redis is unreachable" in output


def test_redis_down_from_the_command_line(worker_env: dict[str, str]) -> None:
    """What a container's health check runs: a fresh process, exit code 1, the failing check named."""
    for role in ("web", "worker", "scheduler"):
        result = python_run([sys.executable, "manage.py", "health", "--role", role],
                                cwd=ROOT, env={**worker_env, "REDIS_URL": CLOSED_PORT},
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"redis: unreachable at {CLOSED_PORT}" in result.stdout
    result = python_run([sys.executable, "manage.py", "health", "--role", "web"], cwd=ROOT, env=worker_env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK (web)")


def test_worker_role_needs_a_live_worker_of_this_host_per_queue(processes: Processes) -> None:
    code, output = health("--role", "worker", "--queue", "io", "--queue", "ai")
    assert code == 1
    assert "worker: no live worker on" in output and "for queue(s) io, ai" in output

    io_worker = processes.worker("io")
    ai_worker = processes.worker("ai")
    wait_for(lambda: healthy("--role", "worker", "--queue", "io", "--queue", "ai"), timeout=120,
             message="the io worker and the ai consumer to register")
    code, output = health("--role", "worker", "--queue", "io", "--queue", "ai", "--json")
    assert json.loads(output)["workers"] == {"io": 1, "ai": 1}
    # Only the queues asked for: nobody serves `default` here.
    code, output = health("--role", "worker", "--queue", "default")
    assert code == 1 and "for queue(s) default" in output

    # Killed outright: RQ keeps its registration until it expires, but its pid is gone on this host.
    killed(io_worker)
    code, output = health("--role", "worker", "--queue", "io", "--queue", "ai")
    assert code == 1
    assert "for queue(s) io" in output and "ai" not in output.split("queue(s)")[1]
    assert ai_worker.poll() is None


def test_scheduler_role_reads_the_scheduler_heartbeat(processes: Processes) -> None:
    code, output = health("--role", "scheduler")
    assert code == 1
    assert "scheduler: no scheduler heartbeat on" in output

    scheduler = processes.scheduler()
    wait_for(lambda: healthy("--role", "scheduler"), timeout=120, message="the scheduler's heartbeat")
    killed(scheduler)
    code, output = health("--role", "scheduler")
    assert code == 1 and "no scheduler heartbeat" in output


def test_all_role_names_every_missing_process_and_late_queue(processes: Processes, redis_conn: Any) -> None:
    import django_rq
    from rq.utils import utcformat

    code, output = health("--role", "all", "--skip", "stuck", "--json")
    assert code == 1
    checks = json.loads(output)["checks"]
    assert checks["workers"] == "no live worker for queue(s) ai, io, default"
    assert checks["scheduler"].startswith("no scheduler heartbeat in the last")
    assert checks["queues"] == "ok" and checks["migrations"] == "ok"

    # A job that has waited ten minutes on `io`.
    job = django_rq.get_queue("io").enqueue("workflows.examples.functions.canned_reply")
    redis_conn.hset(job.key, "enqueued_at", utcformat(datetime.now(UTC) - timedelta(minutes=10)))
    code, output = health("--role", "all", "--skip", "stuck", "--threshold", "60", "--json")
    result = json.loads(output)
    assert result["checks"]["queues"].startswith("jobs waiting longer than 60 s: io (")
    assert result["queues"]["io"]["backlog"] == 1 and result["queues"]["io"]["oldest_s"] >= 600
    assert result["queues"]["ai"] == {"backlog": 0, "oldest_s": None}
    redis_conn.delete(django_rq.get_queue("io").key)

    processes.all_workers()
    wait_for(lambda: healthy("--role", "all", "--skip", "stuck"), timeout=180,
             message="every worker and the scheduler to be seen alive")
    code, output = health("--role", "all")
    assert code == 0, output
    assert output.strip() == "OK (all): database, redis, migrations, workers, scheduler, queues, stuck, clock"
