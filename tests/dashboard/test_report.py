"""The run report over HTTP: GET /api/instances/<id>/report (JSON, ?download=1) and the report page, for an
instance that retried a step, halted on its budget and was approved (real workers run it)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from dashboard.api import shapes
from tests.conftest import chain, wait_for_status
from tests.workflows.functions import EXTRA_FUNCTIONS_ENV
from workflows import runtime
from workflows.models import AuditEntry
from workflows.operators import review

pytestmark = pytest.mark.django_db(transaction=True)

LLM = {"provider": "scripted", "prompt": "x", "script": [{"text": "ok", "tool_calls": [{"name": "lookup"}],
                                                          "usage": {"prompt_tokens": 100, "completion_tokens": 50,
                                                                    "cost_usd": 0.3}}]}
GRAPH = chain(
    {"id": "flaky", "type": "python", "config": {"function": "tests.fail_times", "args": {"failures": 2}},
     "retry": {"max_attempts": 3, "backoff_s": 0.01, "max_backoff_s": 0.01}},
    {"id": "ask0", "type": "llm", "config": LLM},
    {"id": "ask1", "type": "llm", "config": LLM},
    settings={"budget_usd": 0.5},
)


@pytest.fixture
def finished(processes, redis_conn, make_version, user_in):
    """Retried twice, halted over budget after ask1, approved with more budget, completed."""
    env = {**EXTRA_FUNCTIONS_ENV}
    for queue in ("default", "io", "ai"):
        processes.worker(queue, env=env)
    processes.scheduler(env=env)
    instance = runtime.start_instance(make_version(GRAPH, slug="reported"), {})
    wait_for_status(instance, "halted", timeout=60)
    operator = user_in("operators", "olga")
    item = instance.reviews.get(status="open")
    review.decide(item.pk, operator, review.Decision(action="approve", extra_budget_usd="1.0", note="worth it"))
    return wait_for_status(instance, "completed", timeout=60)


def test_the_report_of_a_retried_halted_and_approved_instance(finished, user_in, monkeypatch):
    viewer = Client()
    viewer.force_login(user_in("viewers", "vera"))
    response = viewer.get(f"/api/instances/{finished.pk}/report")
    assert response.status_code == 200
    report = response.json()
    assert [p["node"] for p in report["path"]] == ["start", "flaky", "ask0", "ask1", "end"]
    nodes = {n["node"]: n for n in report["nodes"]}
    assert nodes["flaky"]["retries"] == 2 and nodes["flaky"]["attempts"] == 3
    assert nodes["ask0"]["tokens"] == 150 and nodes["ask0"]["cost_usd"] == pytest.approx(0.3)
    assert nodes["ask1"]["tool_calls"] == 1
    assert report["totals"]["cost_usd"] == pytest.approx(0.6) and report["totals"]["tokens"] == 300
    assert report["totals"]["retries"] == 2 and report["totals"]["tool_calls"] == 2
    assert report["instance"]["status"] == "completed"
    [halt] = report["halts"]
    assert halt["reason"] == "budget_exceeded" and halt["decided_by"] == "olga" and halt["action"] == "approve"
    assert halt["note"] == "worth it"
    assert len(report["audit"]) == AuditEntry.objects.filter(instance=finished).count() >= 1
    assert report["audit"][0]["actor"] == "olga"
    assert all(s["duration_ms"] is not None and s["duration_ms"] >= 0 for s in report["steps"])

    download = viewer.get(f"/api/instances/{finished.pk}/report?download=1")
    assert download.status_code == 200
    assert download["Content-Disposition"] == f'attachment; filename="instance-{finished.pk}-report.json"'
    assert json.loads(download.content) == report

    page = viewer.get(f"/instances/{finished.pk}/report/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "start → flaky → ask0 → ask1 → end" in html
    assert "budget_exceeded" in html and "worth it" in html
    assert f"/api/instances/{finished.pk}/report?download=1" in html
    assert f'href="/instances/{finished.pk}/report/"' in viewer.get(f"/instances/{finished.pk}/").content.decode()

    # Past the step cap the tables cover the first steps and both the JSON and the page say so.
    monkeypatch.setattr(shapes, "MAX_REPORT_STEPS", 2)
    capped = viewer.get(f"/api/instances/{finished.pk}/report").json()
    assert capped["truncated"] is True and capped["totals"]["steps"] == 5 and len(capped["steps"]) == 2
    assert capped["totals"]["cost_usd"] == pytest.approx(0.6)
    assert 'id="report-truncated"' in viewer.get(f"/instances/{finished.pk}/report/").content.decode()


def test_unknown_instances_and_permissions(db, user_in):
    nobody = Client()
    assert nobody.get("/api/instances/1/report").status_code == 401
    assert nobody.get("/instances/1/report/").status_code == 302
    viewer = Client()
    viewer.force_login(user_in("viewers", "vera"))
    missing = viewer.get("/api/instances/999999/report")
    assert missing.status_code == 404 and "999999" in missing.json()["message"]
    assert viewer.get("/instances/999999/report/").status_code == 404
