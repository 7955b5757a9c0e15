"""The review inbox and the instance page's decision panel in a real browser against daphne (issue 13):
a human task answered from the instance page and from the inbox, a loop halt understood (its path with
visit counts) and approved, a budget halt approved with more budget, the navigation's count updating
live, the keyboard shortcut, and the next open item opening after a decision.

Steps run in this process (runtime.run_step, the worker's own entry point) so each halt is reached
exactly; the pages talk to daphne as a browser would.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from tests.conftest import chain
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine.statuses import StepStatus
from workflows.models import ReviewItem, StepRun, WorkflowDefinition, WorkflowInstance

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REFUND = {"id": "approve_refund", "type": "human", "config": {
    "prompt": "Refund {{ context.amount }} EUR for {{ context.ticket }}?",
    "inputs": {"amount": {"type": "number", "minimum": 0, "maximum": 500, "default": 20,
                          "description": "the amount refunded, in EUR"},
               "reason": {"type": "string", "minLength": 3, "description": "told to the customer"}}}}
QUICK = {"id": "confirm", "type": "human", "config": {
    "prompt": "Ship {{ context.ticket }}?",
    "inputs": {"carrier": {"enum": ["post", "courier"], "default": "post", "description": "who ships it"}}}}


def run_queued(instance: WorkflowInstance, limit: int = 100) -> WorkflowInstance:
    """Run queued steps the way a worker would, until none is left (or the instance halts). In a thread of
    its own: an LLM step runs its call with asyncio.run, refused on this thread (Playwright's loop runs here)."""
    from django.db import connection

    def work() -> None:
        try:
            for _ in range(limit):
                step = StepRun.objects.filter(instance=instance, status=StepStatus.QUEUED).order_by("id").first()
                if step is None:
                    break
                runtime.run_step(step.pk, "e2e-worker")
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    instance.refresh_from_db()
    return instance


def human(graph_node: dict[str, Any], slug: str, context: dict[str, Any]) -> WorkflowInstance:
    instance = runtime.start_instance(save_version(slug, chain(graph_node)), context)
    instance.refresh_from_db()
    assert instance.status == "waiting"
    return instance


def loop_halt(settings: dict[str, Any] | None = None) -> WorkflowInstance:
    """The hallucination-loop example (two scripted LLM nodes sending it back and forth), run until halted."""
    call_command("load_examples", stdout=open("/dev/null", "w"))
    graph = dict(WorkflowDefinition.objects.get(slug="hallucination-loop").latest_version().graph)
    graph["settings"] = {**graph.get("settings", {}), **(settings or {})}
    instance = runtime.start_instance(save_version("loop-" + "-".join(sorted(settings or {})) or "loop", graph),
                                      {"ticket": "T-7"})
    run_queued(instance)
    assert instance.status == "halted", (instance.status, instance.error)
    return instance


def open_item(instance: WorkflowInstance) -> ReviewItem:
    return ReviewItem.objects.get(instance=instance, status="open")


def test_a_human_task_is_answered_from_the_instance_page(daphne_page: Any, make_user: Any, login: Any) -> None:
    page = daphne_page
    instance = human(REFUND, "refund-ask", {"amount": 20, "ticket": "T-1"})
    login(page, make_user("olga", "operators"))
    page.goto(f"/instances/{instance.pk}/")
    # The badge says what the instance is: waiting on a person, not running.
    page.wait_for_selector("#review:not([hidden])")
    assert page.locator("#inst-status").inner_text() == "waiting"
    page.wait_for_selector("#conn[data-state='live']")
    assert page.locator("#inst-status").inner_text() == "waiting"
    assert page.locator("#review-title").inner_text() == "Waiting for an answer"
    assert "Refund 20 EUR for T-1?" in page.locator("#review-why").inner_text()
    assert "the amount refunded, in EUR" in page.locator("#rv-form").inner_text()
    assert page.locator("#rv-input-amount").input_value() == "20"
    # The input and context panel: JSON with a copy button.
    assert '"T-1"' in page.locator("#io-input").inner_text()
    assert page.locator("#io-context .jv-copy").is_visible()

    page.click("button[data-action=approve]")  # the reason is missing: said before any request
    assert "reason is required" in page.locator("#review-msg").inner_text()
    page.fill("#rv-input-reason", "parcel lost")
    page.fill("#rv-input-amount", "15")
    page.click("button[data-action=approve]")
    page.wait_for_selector("#review", state="hidden")
    page.locator("#review-msg", has_text="Decided: approve").wait_for(state="attached")
    step = StepRun.objects.get(instance=instance, node_id="approve_refund")
    assert step.status == "succeeded"
    assert step.output["amount"] == 15 and step.output["reason"] == "parcel lost" and step.output["approved"]
    # The form went back to its defaults and its buttons are off: a second click applies nothing again.
    assert page.locator("#rv-input-amount").input_value() == "20"
    assert page.locator("#rv-input-reason").input_value() == ""
    assert page.locator("button[data-action=approve]").is_disabled()
    page.wait_for_selector("#inst-status[data-status='completed']")
    assert page.locator("#io-context-title").inner_text() == "Result (final context)"
    assert '"T-1"' in page.locator("#io-context").inner_text()
    assert page.js_errors == []


def test_the_inbox_answers_a_task_then_opens_the_next_and_the_shortcut_approves(
        daphne_page: Any, make_user: Any, login: Any) -> None:
    page = daphne_page
    first = human(REFUND, "refund-ask", {"amount": 40, "ticket": "T-2"})
    second = human(QUICK, "ship-ask", {"ticket": "T-3"})
    login(page, make_user("olga", "operators"))
    page.goto("/review/")
    page.wait_for_selector("#nav-review-count[data-count='2']")
    page.locator(f"tr[data-item='{open_item(first).pk}'] a").first.click()
    page.wait_for_selector("#rv-form [data-field]")
    page.wait_for_selector("#review-graph[data-ready='1']")
    assert "Refund 40 EUR for T-2?" in page.locator("#rv-why").inner_text()
    assert "a approve" in page.locator("#rv-shortcuts").inner_text()
    page.fill("#rv-input-reason", "late delivery")
    with page.expect_navigation(url=f"**/review/{open_item(second).pk}/"):
        page.click("button[data-action=approve]")
    assert StepRun.objects.get(instance=first, node_id="approve_refund").output["reason"] == "late delivery"
    page.wait_for_selector("#rv-form [data-field]")
    # The keyboard: `a` approves with the form's defaults, then the inbox (nothing left) opens.
    with page.expect_navigation(url="**/review/"):
        page.keyboard.press("a")
    assert StepRun.objects.get(instance=second, node_id="confirm").output["carrier"] == "post"
    assert "Nothing left to review" in page.locator(".messages").inner_text()
    page.wait_for_selector("#nav-review-count[data-count='0']")
    assert page.js_errors == []


def test_a_loop_halt_shows_its_path_with_visit_counts_and_is_approved(daphne_page: Any, make_user: Any,
                                                                       login: Any) -> None:
    page = daphne_page
    instance = loop_halt({"max_transitions": 6})
    item = open_item(instance)
    assert item.reason == "loop_breaker"
    login(page, make_user("olga", "operators"))
    page.goto("/")
    page.wait_for_selector(f"#reviews a[href='/review/{item.pk}/']")  # the dashboard row opens the item
    page.locator(f"#reviews a[href='/review/{item.pk}/']").first.click()
    page.wait_for_selector("#review-graph[data-ready='1']")
    why = page.locator("#rv-why").inner_text()
    assert "node_a → node_b → node_a×2" in why.replace(" ×", "×"), why
    assert page.locator("#rv-why .path-step sup.visit").count() >= 2
    # The graph shows the visits too.
    visits = page.evaluate("Number(document.querySelector(\".visit-badge[data-node='node_a']\").textContent"
                           ".replace('×', ''))")
    assert visits >= 2
    assert page.evaluate("steadyflowReviewGraph.renderedState('node_b')") == "halted"  # where it stopped
    page.fill("#rv-transitions", "4")
    page.click("button[data-action=approve]")
    page.wait_for_url("**/review/")
    item.refresh_from_db()
    instance.refresh_from_db()
    assert item.status == "approved" and item.decision["extra_transitions"] == 4
    assert instance.status == "running" and instance.max_transitions == 10
    assert page.js_errors == []


def test_a_budget_halt_is_approved_with_more_budget(daphne_page: Any, make_user: Any, login: Any,
                                                   doc_shot: Any) -> None:
    page = daphne_page
    instance = loop_halt({"budget_usd": 0.0001, "max_transitions": 50})
    item = open_item(instance)
    assert item.reason == "budget_exceeded", item.details
    login(page, make_user("olga", "operators"))
    page.goto(f"/instances/{instance.pk}/")
    page.wait_for_selector("#review:not([hidden])")
    assert page.locator("#inst-status").inner_text() == "halted"
    spent = page.locator("#review-why").inner_text()
    assert "of $0.0001 budget" in spent, spent
    # Per-node cost and duration on the graph.
    page.wait_for_selector(".stat-badge[data-node='node_a']:not([hidden])")
    assert "$" in page.locator(".stat-badge[data-node='node_a']").inner_text()
    page.fill("#rv-budget", "1")
    page.fill("#rv-note", "worth it")
    # The README's picture of the decision panel and the input and context panel (docs/screenshots).
    doc_shot(page, "instance-result-panel.png", full_page=True)
    page.click("button[data-action=approve]")
    page.wait_for_selector("#review", state="hidden")
    instance.refresh_from_db()
    item.refresh_from_db()
    assert item.status == "approved" and instance.status == "running"
    assert float(instance.budget_usd) == pytest.approx(1.0001)
    assert page.js_errors == []


def test_the_inbox_count_updates_live(daphne_page: Any, make_user: Any, login: Any) -> None:
    page = daphne_page
    login(page, make_user("vic", "viewers"))
    page.goto("/")
    page.wait_for_selector("#nav-review-count[data-count='0']")
    instance = human(QUICK, "ship-ask", {"ticket": "T-4"})
    page.wait_for_selector("#nav-review-count[data-count='1']")
    from workflows.operators import review

    review.decide(open_item(instance).pk, make_user("olga", "operators"), review.Decision(action="reject"))
    page.wait_for_selector("#nav-review-count[data-count='0']")
    assert page.js_errors == []


def test_a_ttl_halt_from_the_instance_page_offers_more_time(daphne_page: Any, make_user: Any, login: Any) -> None:
    page = daphne_page
    graph = chain({"id": "nap", "type": "wait", "config": {"seconds": 60}}, settings={"ttl_s": 60})
    instance = runtime.start_instance(save_version("napping", graph), {})
    assert runtime.expire_instance(instance.pk, timezone.now() + timedelta(hours=1))
    login(page, make_user("olga", "operators"))
    page.goto(f"/instances/{instance.pk}/")
    page.wait_for_selector("#review:not([hidden])")
    assert page.locator("#rv-extra_ttl_s").is_visible()
    assert page.locator("[data-field=extra_ttl_s].primary").count() == 1
    assert page.js_errors == []


def test_a_designer_cancels_what_they_started_and_sees_no_decision_form(daphne_page: Any, make_user: Any,
                                                                        login: Any) -> None:
    page = daphne_page
    dana = make_user("dana", "designers")
    instance = runtime.start_instance(save_version("ship-ask", chain(QUICK)), {"ticket": "T-5"}, user=dana)
    login(page, dana)
    page.goto(f"/instances/{instance.pk}/")
    page.wait_for_selector("#review:not([hidden])")
    assert page.locator("#rv-form").is_hidden() and page.locator("#review-readonly").is_visible()
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#btn-cancel")
    page.wait_for_selector("#inst-status[data-status='cancelled']")
    instance.refresh_from_db()
    assert instance.status == "cancelled"
    assert page.locator("#btn-cancel").is_hidden()
    assert page.js_errors == []
