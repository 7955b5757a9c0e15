"""The settings pages in a real browser: a workflow's triggers, the API tokens, the credentials. They
load the app's stylesheets (house buttons and fields, not the browser's native controls), show stored
JSON as JSON, put a mistake at its field, and run with no script or Content-Security-Policy error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import chain
from workflows.authoring.definitions import save_document
from workflows.triggers.models import Webhook

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

GRAPH = chain({"id": "nap", "type": "wait", "config": {"seconds": 60}})


def house_button(page: Any, selector: str) -> dict[str, str]:
    return page.eval_on_selector(selector, """b => { const s = getComputedStyle(b);
        return {radius: s.borderTopLeftRadius, background: s.backgroundColor}; }""")


def test_the_triggers_tokens_and_credentials_pages_match_the_app(page: Any, login: Callable[..., None],
                                                                  make_user: Callable[..., Any]) -> None:
    version, _ = save_document({"slug": "triage", "name": "Ticket triage", **GRAPH}, message="v1")
    Webhook.objects.create(definition=version.definition, name="desk", input_mapping={"ticket": "/ticket/id"})
    login(page, make_user("dana", "designers", "operators"))

    page.goto("/workflows/triage/triggers/")
    assert page.inner_text("table.webhooks pre.json") == '{\n  "ticket": "/ticket/id"\n}'
    add = "#add-webhook button[value=add_webhook]"
    assert house_button(page, add) == {"radius": "6px", "background": "rgb(37, 99, 235)"}  # button.primary
    assert page.is_visible("label[for=webhook_input_mapping]") and page.is_visible("#webhook_input_mapping_helptext")
    # A mistake stays at its field, with what was typed.
    page.fill("#schedule_cron", "whenever")
    page.click("#add-schedule button[value=add_schedule]")
    page.wait_for_selector("[data-field=cron] .field-error")
    assert "is not a cron expression" in page.inner_text("[data-field=cron] .field-error")
    assert page.input_value("#schedule_cron") == "whenever"
    page.fill("#schedule_cron", "0 3 * * *")
    page.fill("#schedule_input", '{"ticket": 7}')
    page.click("#add-schedule button[value=add_schedule]")
    page.wait_for_selector("table.schedules pre.json")
    assert page.inner_text("table.schedules pre.json") == '{\n  "ticket": 7\n}'

    page.goto("/account/tokens/")
    assert house_button(page, ".token-form button[type=submit]")["radius"] == "6px"
    assert page.is_visible("[data-field=scopes] legend") and page.is_visible("label[for=id_name]")

    page.goto("/credentials/")
    assert house_button(page, ".credential-form button[type=submit]")["radius"] == "6px"
    for name in ("name", "kind", "base_url", "value"):
        assert page.is_visible(f"label[for=id_{name}]"), name
    page.fill("#id_name", "ticket_api")
    page.click(".credential-form button[type=submit]")
    page.wait_for_selector("[data-field=value] .field-error")
    assert page.get_attribute("#id_value", "aria-invalid") == "true"
    assert page.js_errors == []
