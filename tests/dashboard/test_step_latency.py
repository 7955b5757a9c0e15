"""The dashboard's step run times leave out waiting (issue 22): a human task answered after four
minutes is no step's run time, so it counts neither in the per-minute bars nor in p50/p95."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from dashboard.api.stats import step_series
from tests.conftest import chain
from workflows import runtime
from workflows.models import StepRun

pytestmark = pytest.mark.django_db


def test_waiting_steps_are_no_run_time(make_version: Any) -> None:
    now = timezone.now()
    version = make_version(chain({"id": "ask", "type": "human", "config": {"prompt": "ok?"}},
                                 {"id": "nap", "type": "wait", "config": {"seconds": 60}}))
    instance = runtime.start_instance(version, {})
    work = StepRun.objects.filter(instance=instance).first()
    assert work is not None
    fields = {"status": "succeeded", "started_at": now - timedelta(minutes=4), "finished_at": now}
    StepRun.objects.filter(instance=instance, node_id__in=["ask", "nap"]).update(**fields)
    StepRun.objects.create(instance=instance, node_id="tool", node_type="python", visit=1, attempt=1,
                           status="succeeded", started_at=now - timedelta(milliseconds=250), finished_at=now)
    hour = step_series(now + timedelta(seconds=1))["hour"]
    assert (hour["ok"], hour["failed"]) == (1, 0)
    assert 200 <= hour["p50_ms"] <= 300 and hour["p95_ms"] <= 300
