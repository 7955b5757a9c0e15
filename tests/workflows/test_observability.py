"""Observability on real processes: /metrics served by a real daphne adds up what real workers and
the scheduler counted (prometheus_client's multiprocess directory), and every process kind writes
JSON log lines (docs/operating.md, Observability)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command

import tests.workflows.functions  # noqa: F401 - registers tests.* functions in this process
from tests.conftest import chain, wait_for, wait_for_status
from tests.support.web import DaphneServer
from tests.workflows.functions import EXTRA_FUNCTIONS_ENV
from tests.workflows.support import py
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import StepRun, WorkflowDefinition

TOKEN = "metrics-test-token-of-24-chars-or-more"


@pytest.fixture
def observed_env(worker_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """Every process of the test writes its metric values into one directory and logs JSON."""
    return {**worker_env, **EXTRA_FUNCTIONS_ENV, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
            "LOG_FORMAT": "json", "LOG_LEVEL": "INFO", "STEADYFLOW_METRICS_TOKEN": TOKEN,
            "STEADYFLOW_REDISPATCH_AFTER_S": "0.5"}


@pytest.fixture
def web(observed_env: dict[str, str], tmp_path: Path) -> Iterator[DaphneServer]:
    server = DaphneServer(observed_env, tmp_path)
    server.start()
    yield server
    server.stop()


def scrape(web: DaphneServer) -> dict[str, float]:
    response = httpx.get(web.url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert response.status_code == 200, response.text
    samples: dict[str, float] = {}
    for line in response.text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a process's output must be one JSON object (nothing else is written)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in lines]


def sample(samples: dict[str, float], name: str, **labels: str) -> float:
    """The value of the series with exactly these labels (0 when absent)."""
    for series, value in samples.items():
        series_name, _, rest = series.partition("{")
        if series_name == name and dict(re.findall(r'(\w+)="([^"]*)"', rest)) == labels:
            return value
    return 0.0


@pytest.mark.django_db(transaction=True)
def test_metrics_after_a_real_run_and_json_logs_from_every_process(processes, observed_env, web, redis_conn,
                                                                   tmp_path):
    refused = httpx.get(web.url + "/metrics", timeout=10)
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
    before = scrape(web)
    assert sample(before, "steadyflow_steps_total", node_type="python", queue="default", status="succeeded") == 0

    call_command("load_examples")
    logged = save_version("logged", chain(py("a", "tests.log_line"), py("b", "tests.echo", args={"n": 1})))
    first = runtime.start_instance(logged, {})
    # Lost from Redis before any worker took it: the scheduler re-dispatches it.
    redis_conn.flushdb()
    processes.worker("default", env=observed_env)
    processes.worker("ai", env=observed_env)
    processes.scheduler(env=observed_env)
    wait_for_status(first, "completed", timeout=60)
    second = runtime.start_instance(logged, {})
    looping = runtime.start_instance(WorkflowDefinition.objects.get(slug="hallucination-loop").latest_version(),
                                     {"ticket": "T-1"})
    wait_for_status(second, "completed", timeout=60)
    wait_for_status(looping, "halted", timeout=60)

    after = wait_for(lambda: (lambda s: s if sample(s, "steadyflow_steps_total", node_type="python",
                                                     queue="default", status="succeeded") >= 4 else None)(scrape(web)),
                     30, message="the workers' step counts")
    # 2 instances x 2 python steps, on real workers, added up by the web process.
    assert sample(after, "steadyflow_steps_total", node_type="python", queue="default", status="succeeded") == 4
    assert sample(after, "steadyflow_step_duration_seconds_count", node_type="python", queue="default") == 4
    assert sample(after, "steadyflow_step_queue_wait_seconds_count", queue="default") >= 4
    # The loop's scripted llm steps on the ai consumer (as many as the database holds), then its halt. The
    # consumer counts a step after its commit, so the scrape may run a moment ahead of the last one.
    succeeded = StepRun.objects.filter(instance=looping, node_type="llm", status="succeeded").count()
    assert succeeded == 9  # start + 9 activations of the two llm nodes: the 10th activation halts
    after = wait_for(lambda: (lambda s: s if sample(s, "steadyflow_steps_total", node_type="llm", queue="ai",
                                                     status="succeeded") == succeeded else None)(scrape(web)),
                     30, message="the ai consumer's step count")
    assert sample(after, "steadyflow_halts_total", reason="loop_breaker") == 1
    assert sample(after, "steadyflow_instances_finished_total", status="completed") == 2
    assert sample(after, "steadyflow_reconciler_redispatches_total") >= 1
    assert sample(after, "steadyflow_llm_calls_in_flight") == 0
    # Read from the database at scrape time.
    assert sample(after, "steadyflow_instances", status="completed") == 2
    assert sample(after, "steadyflow_instances", status="halted") == 1
    assert sample(after, "steadyflow_review_queue_size", reason="loop_breaker") == 1
    assert sample(after, "steadyflow_breaker_state", key="scripted", state="closed") == 1

    # A web request's line (Django logs a 404 at WARNING): method and path, nothing of the headers.
    assert httpx.get(web.url + "/no-such-page", headers={"Authorization": "Bearer secret-header"}).status_code == 404
    web_lines = wait_for(lambda: {line["logger"]: line for line in json_lines(web.log)
                                  if line.get("path") == "/no-such-page"} or None, 10, message="the web's log lines")
    access, django_request = web_lines["steadyflow.access"], web_lines["django.request"]
    assert (access["process"], access["method"], access["status"], access["level"]) == ("web", "GET", 404, "info")
    assert (django_request["process"], django_request["level"]) == ("web", "warning")
    # Every scrape was logged too (the access log), and no header of any request was.
    assert any(line.get("path") == "/metrics" and line.get("status") == 401 for line in json_lines(web.log))
    assert "secret-header" not in web.log.read_text() and TOKEN not in web.log.read_text()

    processes.stop()
    logs = {path.name: path for path in tmp_path.glob("*.log")}
    worker_log = next(path for name, path in logs.items() if name.startswith("run_worker-default"))
    scheduler_log = next(path for name, path in logs.items() if name.startswith("run_scheduler"))
    ai_log = next(path for name, path in logs.items() if name.startswith("run_worker-ai"))

    # A worker step's line carries the step's context, bound by the runtime; no secret extra.
    step_lines = [line for line in json_lines(worker_log) if line["event"] == "hello from a step"]
    assert len(step_lines) == 2
    mine = next(line for line in step_lines if line["instance"] == first.pk)
    first.refresh_from_db()
    step = first.steps.get(node_id="a")
    assert mine["process"] == "worker" and mine["logger"] == "tests.functions" and mine["colour"] == "blue"
    assert (mine["node"], mine["visit"], mine["attempt"], mine["worker"]) == ("a", 1, 1, step.worker)
    assert mine["trace_id"] == first.trace_id.split("-")[1]
    assert "sk-must-not-appear" not in worker_log.read_text()

    # The ai consumer and the scheduler (which re-dispatched the lost step and said so).
    assert any(line["process"] == "worker" and "ai consumer" in line["event"] for line in json_lines(ai_log))
    scheduler = json_lines(scheduler_log)
    assert scheduler[0]["event"] == "scheduler started" and scheduler[0]["process"] == "scheduler"
    assert any("re-dispatched" in line["event"] and line["logger"] == "steadyflow.reconciler" for line in scheduler)
