"""The review inbox's bulk decision in a real browser (issue 22): tick several open items, Reject them
with one confirmation; the rows leave the inbox and the instances fail."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import chain, past_deadline

pytestmark = [pytest.mark.e2e]


def test_an_operator_rejects_several_items_with_one_confirmation(page: Any, make_user: Any, login: Any,
                                                                 doc_shot: Any) -> None:
    from workflows import runtime
    from workflows.authoring.definitions import save_version
    from workflows.models import ReviewItem

    version = save_version("naps", chain({"id": "nap", "type": "wait", "config": {"seconds": 60}},
                                         settings={"ttl_s": 0.001}))
    items = []
    for _ in range(3):
        instance = runtime.start_instance(version, {})
        assert runtime.expire_instance(instance.pk, now=past_deadline(instance))
        items.append(ReviewItem.objects.get(instance=instance))
    login(page, make_user("olga", "operators"))
    page.goto("/review/")
    assert page.locator("#rv-bulk-reject").is_disabled()
    page.check(f".rv-select[value='{items[0].pk}']")
    page.check(f".rv-select[value='{items[1].pk}']")
    assert page.text_content("#rv-bulk-count") == "2 items selected"
    doc_shot(page.locator("main section.card").first, "review-inbox.png")
    asked: list[str] = []

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    page.click("#rv-bulk-reject")
    page.wait_for_selector("#rv-bulk-result.good")
    assert len(asked) == 1 and asked[0].startswith("Reject 2 open review items?"), asked
    assert page.text_content("#rv-bulk-result") == "Rejected 2 items."
    assert page.locator(".review-list tbody tr").count() == 1
    statuses = {i.pk: ReviewItem.objects.get(pk=i.pk).status for i in items}
    assert statuses == {items[0].pk: "rejected", items[1].pk: "rejected", items[2].pk: "open"}

    # Select all, then Approve: one more confirmation for the rest.
    page.check("#rv-select-all")
    page.click("#rv-bulk-approve")
    page.wait_for_selector("#rv-bulk-result:has-text('Approved 1 item.')")
    assert len(asked) == 2 and ReviewItem.objects.get(pk=items[2].pk).status == "approved"
    assert page.js_errors == []
