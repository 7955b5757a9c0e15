"""The instance page links a sub-workflow's parent and child, in a real browser: the subworkflow node's
inspector links to the child and to the review item it waits on; the child's page names the parent step.
The instances are driven in this process (the parent's step run by hand, dispatch captured)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import chain
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import ReviewItem, StepRun, WorkflowInstance
from workflows.workers import dispatch

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def waiting_parent(monkeypatch: pytest.MonkeyPatch) -> tuple[WorkflowInstance, WorkflowInstance]:
    monkeypatch.setattr(dispatch, "enqueue_steps", lambda items, **options: len(items))
    save_version("kid", chain({"id": "ask", "type": "human", "config": {"prompt": "ok?"}}))
    version = save_version("mom", chain({"id": "sub", "type": "subworkflow", "config": {"workflow": "kid"}}))
    parent = runtime.start_instance(version, {})
    claim = runtime.claim_step(StepRun.objects.get(instance=parent, node_id="sub").pk, "w1")
    assert claim is not None
    runtime.finish_step(claim, runtime.Outcome(result=claim.kind.run(runtime.build_call(claim))))
    parent.refresh_from_db()
    return parent, WorkflowInstance.objects.get(parent_step__instance=parent)


def test_the_inspector_links_to_the_child_and_the_child_names_its_parent_step(
        page: Any, login: Callable[..., None], make_user: Callable[..., Any], redis_conn: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    parent, child = waiting_parent(monkeypatch)
    item = ReviewItem.objects.get(instance=child, status="open")
    login(page, make_user("olga", "operators"))

    page.goto(f"/instances/{parent.pk}/")
    page.wait_for_function(f"() => window.steadyflowLive && steadyflowLive.store.lastSeq >= {parent.event_seq}")
    assert page.locator("#inst-parent").count() == 0  # a top-level instance names no parent
    pos = page.evaluate("() => steadyflowLive.cy.getElementById('sub').renderedPosition()")
    box = page.locator("#cy").bounding_box()
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
    link = page.locator("#insp-runs a.child-instance")
    link.wait_for()
    assert link.inner_text() == f"instance {child.pk}"
    assert "(kid v1, waiting)" in page.locator("#insp-runs p.child-link").inner_text()
    review = page.locator("#insp-runs a.child-review")
    assert review.inner_text() == "review: human_task"
    assert review.get_attribute("href") == f"/review/{item.pk}/"

    link.click()
    page.wait_for_url(f"**/instances/{child.pk}/")
    parent_link = page.locator("#inst-parent")
    assert parent_link.inner_text() == f"started by instance {parent.pk} step sub"
    assert parent_link.locator("a").get_attribute("href") == f"/instances/{parent.pk}/"
    assert page.js_errors == []
