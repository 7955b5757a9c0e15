"""In a real browser, the instance page of a halted instance offers the review form only to who may decide:
a viewer sees why not and no inputs (the form's flex layout used to override its `hidden` attribute), an
operator sees the form. A user who is not staff gets no Admin link. The server-side rules are in
tests/security/test_permissions.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import WorkflowInstance

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HALTING = {
    "nodes": [{"id": "start", "type": "start"}, {"id": "nap", "type": "wait", "config": {"seconds": 60}},
              {"id": "end", "type": "end"}],
    "edges": [{"source": "start", "target": "nap"}, {"source": "nap", "target": "end"}],
    "settings": {"ttl_s": 60},
}


def halted() -> WorkflowInstance:
    instance = runtime.start_instance(save_version("halting", HALTING), {})
    assert runtime.expire_instance(instance.pk, timezone.now() + timedelta(hours=1))
    return instance


def open_review(page: Any, instance: WorkflowInstance) -> None:
    page.goto(f"/instances/{instance.pk}/")
    page.wait_for_selector("#review:not([hidden])")


def test_a_viewer_sees_no_review_form_and_an_operator_does(daphne_page: Any, make_user: Any, login: Any) -> None:
    page = daphne_page
    instance = halted()
    login(page, make_user("vic", "viewers"))
    open_review(page, instance)
    for selector in (".review-form", "#rv-note", "#rv-transitions", "button[data-action=approve]",
                     "button[data-action=cancel]"):
        assert page.locator(selector).is_hidden(), selector
    assert page.locator("#rv-note").is_disabled()
    readonly = page.locator("#review-readonly")
    assert readonly.is_visible() and "workflows.decide_reviewitem (the operators group)" in readonly.inner_text()
    assert page.locator("header.topbar a[href='/admin/']").count() == 0  # not staff
    assert page.js_errors == []

    page.context.clear_cookies()
    login(page, make_user("olga", "operators"))
    open_review(page, instance)
    assert page.locator(".review-form").is_visible() and page.locator("#rv-note").is_enabled()
    assert page.locator("button[data-action=approve]").is_visible()
    assert page.locator("#review-readonly").is_hidden()
    assert page.js_errors == []
