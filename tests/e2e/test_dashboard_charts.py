"""The dashboard's two bar charts in a real browser (issue 22, item 15): the tallest bar stops short of the
plot area's top, so it never reads as clipped: the steps-per-minute chart (static/js/dashboard/main.js) and
the daily chart (static/js/dashboard/daily.js) both keep ~10% headroom (Chart.js `grace`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.dashboard.test_operations import run_queued, start
from tests.workflows.support import py

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The tallest stack's top and the plot area, in canvas pixels, from the chart Chart.js drew.
TALLEST = """(id) => {
  const chart = window.Chart.getChart(document.getElementById(id));
  const tops = [];
  chart.data.datasets.forEach((set, i) => {
    if (set.type !== "bar") return;
    chart.getDatasetMeta(i).data.forEach((bar, j) => { if (set.data[j]) tops.push(bar.y); });
  });
  return { top: Math.min(...tops), area: { top: chart.chartArea.top, bottom: chart.chartArea.bottom } };
}"""


def headroom(page: Any, canvas: str) -> float:
    """The gap above the tallest bar as a share of the plot area's height."""
    drawn = page.evaluate(TALLEST, canvas)
    area = drawn["area"]
    assert area["top"] <= drawn["top"] < area["bottom"], drawn
    return float((drawn["top"] - area["top"]) / (area["bottom"] - area["top"]))


def test_the_tallest_bars_leave_headroom(page: Any, login: Callable[..., None], make_user: Callable[..., Any],
                                         redis_conn: Any) -> None:
    # Three instances finished today (the daily chart's one bar: 3) of two steps each, in this minute.
    for _ in range(3):
        assert run_queued(start(chain(py("a", "tests.echo"), py("b", "tests.echo")))).status == "completed"
    from django.core.cache import cache

    cache.clear()  # the figures are cached across requests: an earlier test's must not answer
    login(page, make_user("vera", "viewers"))
    page.goto("/")
    page.wait_for_selector("#daily[data-loaded='30']")
    assert page.text_content("#daily-finished") == "3"
    page.wait_for_function("() => !!window.Chart && !!window.Chart.getChart(document.getElementById('chart-steps'))"
                           " && !!window.Chart.getChart(document.getElementById('chart-daily'))")
    # Without headroom the top of the tallest bar is the plot area's top (0.0): the bar reads as cut off.
    assert headroom(page, "chart-daily") >= 0.08
    assert headroom(page, "chart-steps") >= 0.08
    assert page.js_errors == []
