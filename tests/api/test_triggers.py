"""v1 triggers: a workflow's schedules and webhooks through the API, with the triggers page's checks."""

from __future__ import annotations

import time

import pytest

from tests.api.conftest import SIMPLE, assert_problem
from workflows.authoring.definitions import save_version
from workflows.triggers import signing
from workflows.triggers.models import Schedule, Webhook


@pytest.fixture
def flow(db: None) -> str:
    save_version("nightly", SIMPLE)
    return "nightly"


def test_schedules_crud_with_next_fire_times(as_role, flow):
    designer = as_role("designer", "read", "design")
    made = designer.post(f"workflows/{flow}/schedules", {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin",
                                                         "catch_up": "once", "input": {"report": "daily"}})
    assert made.status_code == 201, made.content
    schedule = made.json()
    assert (schedule["cron"], schedule["timezone"], schedule["catch_up"], schedule["input"], schedule["enabled"]) == (
        "0 9 * * 1-5", "Europe/Berlin", "once", {"report": "daily"}, True)
    assert len(schedule["next_fire_times"]) == 5 and schedule["next_fire_times"] == sorted(schedule["next_fire_times"])
    assert Schedule.objects.get(pk=schedule["id"]).next_fire_at is not None

    listed = designer.get(f"workflows/{flow}/schedules").json()["items"]
    assert [s["id"] for s in listed] == [schedule["id"]]

    off = designer.call("PATCH", f"workflows/{flow}/schedules/{schedule['id']}", {"enabled": False})
    assert off.status_code == 200 and off.json()["enabled"] is False and off.json()["next_fire_times"] == []
    on = designer.call("PATCH", f"workflows/{flow}/schedules/{schedule['id']}", {"enabled": True})
    assert on.json()["enabled"] is True and len(on.json()["next_fire_times"]) == 5

    assert designer.call("DELETE", f"workflows/{flow}/schedules/{schedule['id']}").status_code == 204
    assert not Schedule.objects.exists()
    assert_problem(designer.call("DELETE", f"workflows/{flow}/schedules/{schedule['id']}"), 404, "no schedule")


def test_a_schedule_created_disabled(as_role, flow):
    made = as_role("designer").post(f"workflows/{flow}/schedules", {"cron": "*/5 * * * *", "enabled": False})
    assert made.status_code == 201 and made.json()["enabled"] is False
    assert Schedule.objects.get().enabled is False


@pytest.mark.parametrize(("body", "fragment"), [
    ({"cron": "every day"}, "not a cron expression"),
    ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "not a time zone"),
    ({"cron": "61 * * * *"}, "not a cron expression"),
    ({"cron": "0 0 30 2 *"}, "never fires"),
])
def test_schedule_validation_is_the_triggers_pages(as_role, flow, body, fragment):
    assert_problem(as_role("designer").post(f"workflows/{flow}/schedules", body), 422, fragment)
    assert not Schedule.objects.exists()


def test_schedule_fields_are_typed(as_role, flow):
    body = assert_problem(as_role("designer").post(f"workflows/{flow}/schedules",
                                                   {"cron": "0 9 * * *", "catch_up": "sometimes", "input": [1]}), 422)
    assert {"body.catch_up", "body.input"} <= {e["field"] for e in body["errors"]}


def test_webhooks_crud_and_the_secret_is_shown_once(as_role, flow, client):
    designer = as_role("designer", "read", "design")
    made = designer.post(f"workflows/{flow}/webhooks", {"name": "crm", "input_mapping": {"email": "customer.email"}})
    assert made.status_code == 201, made.content
    hook = made.json()
    stored = Webhook.objects.get(hook_id=hook["id"])
    assert hook["secret"] == stored.secret and hook["url"].endswith(f"/hooks/{flow}/{hook['id']}")
    assert hook["input_mapping"] == {"email": "customer.email"} and hook["enabled"] is True

    listed = designer.get(f"workflows/{flow}/webhooks")
    assert [h["id"] for h in listed.json()["items"]] == [hook["id"]]
    assert stored.secret not in listed.content.decode()  # never again after the create response

    rotated = designer.post(f"workflows/{flow}/webhooks/{hook['id']}/rotate")
    assert rotated.status_code == 200
    stored.refresh_from_db()
    assert rotated.json()["secret"] == stored.secret != hook["secret"] == stored.previous_secret
    assert rotated.json()["previous_secret_valid_until"] is not None

    # A delivery signed with the new secret starts the workflow; the old one still verifies (grace).
    for n, secret in enumerate((stored.secret, hook["secret"])):
        body = b'{"customer": {"email": "a@example.com"}}'
        signed = signing.header_value([secret], int(time.time()), body, f"d{n}")
        answer = client.post(f"/hooks/{flow}/{hook['id']}", body, content_type="application/json",
                             **{"HTTP_STEADYFLOW_SIGNATURE": signed, "HTTP_STEADYFLOW_DELIVERY": f"d{n}"})
        assert answer.status_code in (200, 201, 202), answer.content

    off = designer.call("PATCH", f"workflows/{flow}/webhooks/{hook['id']}", {"enabled": False})
    assert off.status_code == 200 and off.json()["enabled"] is False and "secret" not in off.json()
    assert designer.call("DELETE", f"workflows/{flow}/webhooks/{hook['id']}").status_code == 204
    assert not Webhook.objects.exists()
    assert_problem(designer.post(f"workflows/{flow}/webhooks/{hook['id']}/rotate"), 404, "no webhook")


def test_a_bad_input_mapping_is_refused(as_role, flow):
    body = assert_problem(as_role("designer").post(f"workflows/{flow}/webhooks", {"input_mapping": {"a": 3}}), 422)
    assert body["errors"][0]["field"] == "body.input_mapping"
    assert not Webhook.objects.exists()


def test_scopes_and_permissions(as_role, flow):
    reader = as_role("designer", "read")
    assert reader.get(f"workflows/{flow}/schedules").status_code == 200
    assert reader.get(f"workflows/{flow}/webhooks").status_code == 200
    assert_problem(reader.post(f"workflows/{flow}/schedules", {"cron": "0 9 * * *"}), 403, "design")
    assert_problem(reader.post(f"workflows/{flow}/webhooks", {}), 403, "design")
    # An operator may start workflows but not change their triggers, whatever the token holds.
    assert_problem(as_role("operator").post(f"workflows/{flow}/webhooks", {}), 403)
    assert_problem(as_role("designer", "design").get(f"workflows/{flow}/webhooks"), 403, "read")
    assert_problem(as_role("designer").get("workflows/nope/schedules"), 404, "does not exist")
    assert not Webhook.objects.exists() and not Schedule.objects.exists()
