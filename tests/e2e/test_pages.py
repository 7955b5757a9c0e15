"""The dashboard, review and instance pages' scripts in a real browser (native ES modules under the
Content-Security-Policy): they draw from the tables the server serves (dashboard/pages/meta.py), not copies.
The instance is halted by the loop breaker in this process (no workers), so pytest-django's WSGI live
server suffices: without a socket the live page catches up over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dashboard.pages.meta import ui_meta
from tests.conftest import halts_as_it_starts
from tests.dashboard.test_operations import run_queued, start
from workflows.models import ReviewItem

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def halted_instance() -> Any:
    inst = run_queued(start(halts_as_it_starts()))
    assert inst.status == "halted"
    return inst


def test_dashboard_tiles_follow_the_served_order(page: Any, login: Callable[..., None], make_user: Callable[..., Any],
                                                 redis_conn: Any) -> None:
    login(page, make_user("vera", "viewers"))
    page.goto("/")
    page.wait_for_function("() => document.querySelectorAll('#counts a.tile').length > 0")
    tiles = page.eval_on_selector_all("#counts a.tile", "ts => ts.map(t => t.dataset.status)")
    assert tiles == ui_meta()["dashboardOrder"]
    assert page.js_errors == []


def test_review_and_instance_pages_draw_the_halted_graph(page: Any, login: Callable[..., None],
                                                         make_user: Callable[..., Any], redis_conn: Any) -> None:
    inst = halted_instance()
    item = ReviewItem.objects.get(instance=inst, status="open")
    login(page, make_user("olga", "operators"))

    page.goto(f"/review/{item.pk}/")
    page.wait_for_selector("#review-graph[data-ready='1']")

    page.goto(f"/instances/{inst.pk}/")
    page.wait_for_function(f"() => window.steadyflowLive && steadyflowLive.store.lastSeq >= {inst.event_seq}")
    assert page.text_content("#inst-status") == "halted"
    meta = ui_meta()
    assert page.eval_on_selector_all("#legend li:not(.hint)", "ls => ls.map(l => l.textContent)") == meta["legend"]
    # The node the breaker stopped at is drawn halted, in the served colour.
    drawn = {n: page.evaluate("(id) => steadyflowLive.renderedState(id)", n) for n in ("w1", "w2", "w3")}
    halted = [n for n, s in drawn.items() if s == "halted"]
    assert halted, "no node is drawn halted"
    colour = page.evaluate("(id) => steadyflowLive.cy.getElementById(id).style('background-color')", halted[0])
    r, g, b = (int(meta["statusColors"]["halted"][i:i + 2], 16) for i in (1, 3, 5))
    assert colour == f"rgb({r},{g},{b})"
    assert page.is_visible("#review")  # the review panel of a halted instance
    assert page.js_errors == []
