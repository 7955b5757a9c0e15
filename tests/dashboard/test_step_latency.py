"""The dashboard's step run times leave out waiting (issue 22): a human task answered after four
minutes is no step's run time, so it counts neither in the per-minute bars nor in p50/p95; the daily
chart's p50/p95 (workflows/retention/rollup.py) leave it out too, live and once rolled up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from dashboard.api.stats import step_series
from tests.conftest import chain
from workflows import runtime
from workflows.models import StepRun, WorkflowInstance
from workflows.retention import rollup

pytestmark = pytest.mark.django_db


def waited_four_minutes(make_version: Any, now: Any) -> Any:
    """An instance whose human task and timer each took four minutes and whose python step took 250 ms."""
    version = make_version(chain({"id": "ask", "type": "human", "config": {"prompt": "ok?"}},
                                 {"id": "nap", "type": "wait", "config": {"seconds": 60}}))
    instance = runtime.start_instance(version, {})
    work = StepRun.objects.filter(instance=instance).first()
    assert work is not None
    fields = {"status": "succeeded", "started_at": now - timedelta(minutes=4), "finished_at": now}
    StepRun.objects.filter(instance=instance, node_id__in=["ask", "nap"]).update(**fields)
    StepRun.objects.create(instance=instance, node_id="tool", node_type="python", visit=1, attempt=1,
                           status="succeeded", started_at=now - timedelta(milliseconds=250), finished_at=now)
    return instance


def test_waiting_steps_are_no_run_time(make_version: Any) -> None:
    now = timezone.now()
    waited_four_minutes(make_version, now)
    hour = step_series(now + timedelta(seconds=1))["hour"]
    assert (hour["ok"], hour["failed"]) == (1, 0)
    assert 200 <= hour["p50_ms"] <= 300 and hour["p95_ms"] <= 300


def test_the_daily_run_times_leave_out_waiting_too(make_version: Any) -> None:
    now = timezone.now()
    instance = waited_four_minutes(make_version, now)
    WorkflowInstance.objects.filter(pk=instance.pk).update(status="completed", finished_at=now)
    today = rollup.daily_series(now + timedelta(seconds=1), 1)[0]
    assert today["steps_ok"] >= 2  # the waiting steps are steps all the same
    # 250 ms falls in the (200, 500] bucket; four minutes of waiting would make p95 300,000 ms.
    assert today["step_p50_ms"] == today["step_p95_ms"] == 500.0, today
    rollup.roll_up(now.date())  # and the same once the day is rolled up
    assert rollup.daily_series(now + timedelta(days=1), 2)[0] == today
