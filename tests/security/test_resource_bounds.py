"""Issue 19, item 15 (the parts done here): `x in steps` in a condition costs one query however many
tests it makes and loads no output; the OpenAPI document is made once per process; the planner API
answers 429 with Retry-After past STEADYFLOW_PLANNER_CONCURRENCY plans at once."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.api import v1
from tests.conftest import chain
from workflows.authoring import planning
from workflows.engine import expressions
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import StepOutputs


def test_membership_in_steps_is_one_query_and_loads_no_output(instance: WorkflowInstance) -> None:
    StepRun.objects.filter(instance_id=instance.pk).update(status="succeeded", output={"big": "x" * 100_000})
    node = StepRun.objects.filter(instance_id=instance.pk).values_list("node_id", flat=True).first()
    steps = StepOutputs(instance.pk)
    condition = f"'{node}' in steps and 'nope' not in steps and 'other' not in steps and '{node}' in steps"
    with CaptureQueriesContext(connection) as queries:
        assert expressions.evaluate(condition, {"steps": steps}) is True
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert "output" not in queries[0]["sql"].lower().split("from")[0]


def test_the_openapi_document_is_made_once(admin_client_: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    original = v1.SteadyflowAPI._make_schema

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(v1.SteadyflowAPI, "_make_schema", counting)
    v1.api.__dict__.pop("_schemas", None)
    first = admin_client_.get("/api/v1/openapi.json")
    second = admin_client_.get("/api/v1/openapi.json")
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json() and "Problem" in first.json()["components"]["schemas"]
    assert len(made) == 1


@pytest.mark.django_db(transaction=True)
def test_the_planner_api_is_capped(settings: Any, monkeypatch: pytest.MonkeyPatch, django_user_model: Any,
                                   make_version: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "PLANNER_CONCURRENCY": 1}
    make_version(chain({"id": "work", "type": "python", "config": {"function": "noop"}}), "planned")
    user = django_user_model.objects.create_superuser("planner", password=None)
    entered, leave = threading.Event(), threading.Event()

    def slow(request: Any) -> Any:
        entered.set()
        leave.wait(10)
        raise planning.PlanFailed("the provider gave up", 502)

    monkeypatch.setattr(planning, "propose", slow)
    monkeypatch.setattr(planning, "request_from", lambda body: body)

    def client() -> Client:
        c = Client()
        c.force_login(user)
        return c

    body = json.dumps({"objective": "x"})
    answers: list[int] = []
    first = threading.Thread(target=lambda: answers.append(client().post(
        "/api/workflows/planned/plan", body, content_type="application/json").status_code))
    first.start()
    assert entered.wait(10)
    try:
        for path in ("/api/workflows/planned/plan", "/api/v1/workflows/planned/plan"):
            refused = client().post(path, body, content_type="application/json")
            assert refused.status_code == 429, refused.content
            assert refused["Retry-After"] == "10"
            assert "PLANNER_CONCURRENCY" in refused.content.decode()
    finally:
        leave.set()
        first.join()
    assert answers == [502]
    # The slot came back.
    leave.clear()
    leave.set()
    assert client().post("/api/workflows/planned/plan", body, content_type="application/json").status_code == 502


def test_a_step_list_holds_a_bounded_size_of_inputs_and_outputs(instance: WorkflowInstance, admin_client_: Client,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 15: the step list reads sizes first and loads inputs and outputs only within its budget; the
    rest point to their node's runs, which always show the first."""
    from django.utils import timezone

    from dashboard.api import instance_api

    monkeypatch.setattr(instance_api, "STEP_LIST_BYTES", 25_000)
    big = "x" * 10_000
    StepRun.objects.bulk_create([
        StepRun(instance=instance, node_id=f"big{n}", node_type="python", visit=1, queue="default",
                status="succeeded", idempotency_key=f"{instance.pk}:big{n}:1", trace_id=instance.trace_id,
                created_at=timezone.now(), output={"text": big})
        for n in range(4)])
    data = admin_client_.get(f"/api/instances/{instance.pk}/steps").json()
    outputs = {s["node"]: s["output"] for s in data["steps"]}
    kept = [n for n in ("big0", "big1", "big2", "big3") if outputs[n] == {"text": big}]
    assert kept == ["big0", "big1"] and data["payloads_truncated"] is True  # 2 × 10 KB fit in 25 KB
    later = outputs["big3"]
    assert later["truncated"] is True and later["fetch"] == f"/api/instances/{instance.pk}/steps?node=big3"
    assert admin_client_.get(later["fetch"]).json()["steps"][0]["output"] == {"text": big}
