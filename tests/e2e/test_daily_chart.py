"""The dashboard's daily chart (static/js/dashboard/daily.js) in a real browser: it draws the last 30 days
from GET /api/dashboard/daily, including a day whose history retention has deleted (read from the daily
rollup)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.dashboard.test_operations import run_queued, start
from tests.workflows.support import py
from workflows.models import StepRun, WorkflowInstance
from workflows.retention import history
from workflows.retention import runner as retention

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_daily_chart_draws_days_whose_history_is_gone(page: Any, login: Callable[..., None],
                                                          make_user: Callable[..., Any], redis_conn: Any,
                                                          settings: Any) -> None:
    old = run_queued(start(chain(py("a", "tests.echo"), py("b", "tests.echo"))))
    recent = run_queued(start(chain(py("a", "tests.echo"))))
    assert old.status == recent.status == "completed"
    shift = timedelta(days=20)
    WorkflowInstance.objects.filter(pk=old.pk).update(created_at=F("created_at") - shift,
                                                      finished_at=F("finished_at") - shift)
    StepRun.objects.filter(instance=old).update(started_at=F("started_at") - shift,
                                                finished_at=F("finished_at") - shift)
    # History kept 10 days: the old instance's goes (after its day is rolled up), the recent one's stays.
    settings.STEADYFLOW = {**settings.STEADYFLOW, "RETENTION_DAYS": 10.0}
    outcome = retention.run_once(timezone.now(), cursor=history.Cursor())
    assert outcome.instances == [old.pk] and not StepRun.objects.filter(instance=old).exists()

    # The figures are cached for CACHE_S across requests: an earlier test's page must not answer this one.
    from django.core.cache import cache

    cache.clear()
    login(page, make_user("vera", "viewers"))
    page.goto("/")
    page.wait_for_selector("#daily[data-loaded='30']")
    assert page.text_content("#daily-finished") == "2"
    assert page.text_content("#daily-steps") == "3"  # a and b of the old one (from the rollup), a of the recent
    assert page.evaluate("() => !!window.Chart && !!window.Chart.getChart(document.getElementById('chart-daily'))")
    assert page.js_errors == []
