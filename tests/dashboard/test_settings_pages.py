"""The settings pages (a workflow's triggers, API tokens, credentials) in the app's look: stored JSON is
shown as JSON, never as a Python repr, and forms are rendered field by field with labels, help text and
errors (templates/dashboard/includes/form_fields.html), not Django's default <table>/<p> layouts."""

from __future__ import annotations

import html
import re
from typing import Any

from django.test import Client

from tests.conftest import chain
from workflows.triggers.models import Schedule, Webhook

GRAPH = chain({"id": "nap", "type": "wait", "config": {"seconds": 60}})


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def assert_house_form(page: str, field_names: list[str]) -> None:
    """Every named field sits in a `.field` block with its <label for=...>; none of Django's defaults."""
    for name in field_names:
        block = re.search(rf'<div class="field[^"]*" data-field="{name}">(.*?)</div>', page, re.S)
        assert block, f"field {name} is not rendered in a .field block"
        assert 'class="field-label"' in block.group(1), name
    assert "<tr><th><label" not in page  # as_table
    assert not re.search(r"<p>\s*<label", page)  # as_p
    assert 'css/forms.css' in page and 'css/live.css' in page  # the house buttons and field styles


def test_the_triggers_page_shows_json_not_python_reprs(make_version: Any, user_in: Any) -> None:
    definition = make_version(GRAPH, slug="triage").definition
    Webhook.objects.create(definition=definition, name="desk", input_mapping={"ticket": "/ticket/id"})
    Schedule.objects.create(definition=definition, cron="0 3 * * *", input={"ticket": {"urgent": True, "n": None}})
    page = login(user_in("designers")).get("/workflows/triage/triggers/").content.decode()
    assert "{&#x27;ticket&#x27;" not in page and "{'ticket'" not in page
    assert "&quot;urgent&quot;: True" not in page and "&#x27;n&#x27;: None" not in page
    shown = html.unescape(page)
    assert '<pre class="json">{\n  "ticket": "/ticket/id"\n}</pre>' in shown  # json.dumps(indent=2)
    assert '"urgent": true' in shown and '"n": null' in shown
    assert_house_form(page, ["name", "input_mapping", "cron", "timezone", "catch_up", "input"])
    # Two forms with a priority field each: distinct ids, one label each.
    assert 'id="webhook_priority"' in page and 'id="schedule_priority"' in page


def test_a_triggers_mistake_is_shown_at_its_field_with_the_typed_text_kept(make_version: Any, user_in: Any) -> None:
    make_version(GRAPH, slug="triage")
    designer = login(user_in("designers"))
    response = designer.post("/workflows/triage/triggers/", {"action": "add_schedule", "cron": "whenever",
                                                             "timezone": "Mars/Olympus", "input": '{"a": 1}'})
    assert response.status_code == 400
    page = response.content.decode()
    cron = re.search(r'data-field="cron">(.*?)</div>', page, re.S)
    assert cron and "is not a cron expression" in cron.group(1) and 'aria-invalid="true"' in cron.group(1)
    assert 'value="whenever"' in page and "{&quot;a&quot;: 1}" in page  # what was typed is still there
    assert not Schedule.objects.exists()
    bad_zone = designer.post("/workflows/triage/triggers/", {"action": "add_schedule", "cron": "0 3 * * *",
                                                             "timezone": "Mars/Olympus"}).content.decode()
    zone = re.search(r'data-field="timezone">(.*?)</div>', bad_zone, re.S)
    assert zone and "is not a time zone" in zone.group(1)
    bad_input = designer.post("/workflows/triage/triggers/", {"action": "add_schedule", "cron": "0 3 * * *",
                                                              "input": "[1]"}).content.decode()
    assert re.search(r'data-field="input">.*?must be a JSON object', bad_input, re.S)


def test_the_tokens_and_credentials_forms_are_rendered_field_by_field(user_in: Any, admin_user: Any) -> None:
    tokens = login(user_in("operators")).get("/account/tokens/").content.decode()
    assert_house_form(tokens, ["name", "scopes", "expires_in_days"])
    assert 'id="id_scopes_helptext"' in tokens and "operate: cancel" in tokens  # the scopes' help, linked
    credentials = login(admin_user).get("/credentials/").content.decode()
    assert_house_form(credentials, ["name", "kind", "base_url", "description", "value", "allowed_models_text"])
    assert "Write-only: never shown again after saving." in credentials
    refused = login(admin_user).post("/credentials/", {"name": "x", "kind": "secret"})
    assert refused.status_code == 400
    value = re.search(r'data-field="value">(.*?)</div>', refused.content.decode(), re.S)
    assert value and "a new credential needs a value" in value.group(1) and "field-error" in value.group(1)
