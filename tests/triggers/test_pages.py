"""The workflow's triggers page and the admin: designers add and manage webhooks and schedules, the
secret is shown once, next fire times and rejected deliveries are visible, secrets never in the admin."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

from tests.conftest import chain
from workflows.triggers.models import NotificationChannel, Schedule, Webhook, WebhookRejection

GRAPH = chain({"id": "nap", "type": "wait", "config": {"seconds": 60}})


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_designers_manage_webhooks_and_the_secret_is_shown_once(make_version: Any, user_in: Any) -> None:
    make_version(GRAPH, slug="orders")
    designer = login(user_in("designers"))
    url = "/workflows/orders/triggers/"
    response = designer.post(url, {"action": "add_webhook", "name": "shop", "input_mapping": '{"id": "/order/id"}'})
    assert response.status_code == 200  # shown in this answer, never kept in the session
    hook = Webhook.objects.get()
    assert hook.input_mapping == {"id": "/order/id"}
    page = response.content.decode()
    assert hook.secret in page and f"/hooks/orders/{hook.hook_id}" in page
    assert hook.secret not in designer.get(url).content.decode()  # once
    # Rotation: a new secret shown once, the old one kept for the grace period.
    old = hook.secret
    rotated = designer.post(url, {"action": "rotate_webhook", "id": hook.pk})
    hook.refresh_from_db()
    assert hook.previous_secret == old and hook.secret != old
    assert hook.secret in rotated.content.decode() and hook.secret not in designer.get(url).content.decode()
    designer.post(url, {"action": "disable_webhook", "id": hook.pk})
    hook.refresh_from_db()
    assert not hook.enabled
    # A bad mapping is a message, not a 500.
    bad = designer.post(url, {"action": "add_webhook", "input_mapping": '["x"]'}, follow=True)
    assert "the input mapping must be an object" in bad.content.decode()
    WebhookRejection.objects.create(webhook=hook, status=401, reason="signature does not match", delivery_id="d-9")
    viewer_page = login(user_in("viewers")).get(url).content.decode()
    assert "signature does not match" in viewer_page and "d-9" in viewer_page
    assert "Add webhook" not in viewer_page and hook.secret not in viewer_page
    designer.post(url, {"action": "delete_webhook", "id": hook.pk})
    assert not Webhook.objects.exists()


def test_the_webhook_url_is_the_requests_address_or_the_public_url(make_version: Any, user_in: Any,
                                                                    settings: Any) -> None:
    hook = Webhook.objects.create(definition_id=make_version(GRAPH, slug="orders").definition_id, name="shop")
    viewer = login(user_in("viewers"))
    page = viewer.get("/workflows/orders/triggers/", HTTP_HOST="127.0.0.1:8766").content.decode()
    assert f"http://127.0.0.1:8766/hooks/orders/{hook.hook_id}" in page and ":8000" not in page
    settings.STEADYFLOW = {**settings.STEADYFLOW, "PUBLIC_URL": "https://flows.example.com/"}
    page = viewer.get("/workflows/orders/triggers/", HTTP_HOST="127.0.0.1:8766").content.decode()
    assert f"https://flows.example.com/hooks/orders/{hook.hook_id}" in page


def test_triggers_are_linked_from_the_editor_and_the_workflow_list(make_version: Any, user_in: Any) -> None:
    make_version(GRAPH, slug="orders")
    viewer = login(user_in("viewers"))
    assert 'href="/workflows/orders/triggers/"' in viewer.get("/workflows/orders/edit/").content.decode()
    assert 'href="/workflows/orders/triggers/"' in viewer.get("/workflows/").content.decode()


def test_designers_manage_schedules_with_their_next_fire_times(make_version: Any, user_in: Any) -> None:
    make_version(GRAPH, slug="nightly")
    designer = login(user_in("designers"))
    url = "/workflows/nightly/triggers/"
    designer.post(url, {"action": "add_schedule", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
                        "catch_up": "once", "input": '{"full": true}'})
    schedule = Schedule.objects.get()
    assert (schedule.timezone, schedule.catch_up, schedule.input) == ("Europe/Berlin", "once", {"full": True})
    page = designer.get(url).content.decode()
    assert len(re.findall(r"\d{4}-\d\d-\d\d (01|02):00", page)) == 5  # 03:00 Berlin in UTC, five times
    bad = designer.post(url, {"action": "add_schedule", "cron": "whenever", "timezone": "UTC"}, follow=True)
    assert "is not a cron expression" in bad.content.decode()
    designer.post(url, {"action": "disable_schedule", "id": schedule.pk})
    schedule.refresh_from_db()
    assert not schedule.enabled
    designer.post(url, {"action": "delete_schedule", "id": schedule.pk})
    assert not Schedule.objects.exists()


def test_the_admin_shows_triggers_but_never_secrets(make_version: Any, user_in: Any, admin_client: Client) -> None:
    version = make_version(GRAPH, slug="orders")
    hook = Webhook.objects.create(definition=version.definition)
    channel = NotificationChannel.objects.create(name="pager", kind="webhook", target="https://example.com/hook")
    schedule = Schedule.objects.create(definition=version.definition, cron="*/5 * * * *")
    for path in (f"/admin/workflows/webhook/{hook.pk}/change/",
                 f"/admin/workflows/notificationchannel/{channel.pk}/change/",
                 "/admin/workflows/webhook/", "/admin/workflows/notificationchannel/"):
        body = admin_client.get(path).content.decode()
        assert hook.secret not in body and channel.secret not in body, path
    schedule_page = admin_client.get(f"/admin/workflows/schedule/{schedule.pk}/change/").content.decode()
    assert "next 5 fire times" in schedule_page.lower()
    # Designers see schedules in the admin; operators see channels.

    def staff(role: str) -> Client:
        user = user_in(role)
        user.is_staff = True
        user.save()
        return login(user)

    assert staff("designers").get("/admin/workflows/schedule/").status_code == 200
    assert staff("operators").get("/admin/workflows/notificationchannel/").status_code == 200
    assert staff("viewers").get("/admin/workflows/notificationchannel/").status_code == 403


def test_the_admin_validates_channels_and_mappings(make_version: Any, admin_client: Client) -> None:
    add = "/admin/workflows/notificationchannel/add/"
    bad_url = admin_client.post(add, {"name": "x", "kind": "webhook", "target": "ftp://host/x", "events": '["failed"]',
                                      "enabled": "on"})
    assert "an http(s) URL" in bad_url.content.decode()
    bad_mail = admin_client.post(add, {"name": "x", "kind": "email", "target": "ops@example.com, nobody",
                                       "events": '["failed"]', "enabled": "on"})
    assert "&#x27;nobody&#x27; is not an email address" in bad_mail.content.decode()
    bad_events = admin_client.post(add, {"name": "x", "kind": "email", "target": "ops@example.com",
                                         "events": '["everything"]', "enabled": "on"})
    assert "a list of events among" in bad_events.content.decode()
    ok = admin_client.post(add, {"name": "x", "kind": "webhook", "target": "https://hooks.example.com/x",
                                 "events": '["failed", "review"]', "enabled": "on", "secret": "whsec_mine"})
    assert ok.status_code == 302
    assert NotificationChannel.objects.get().secret == "whsec_mine"
    hook = Webhook.objects.create(definition=make_version(GRAPH).definition)
    bad_mapping = admin_client.post(f"/admin/workflows/webhook/{hook.pk}/change/",
                                    {"name": "", "enabled": "on", "input_mapping": '{"a": 1}',
                                     "rejections-TOTAL_FORMS": "0", "rejections-INITIAL_FORMS": "0"})
    assert "must be a string" in bad_mapping.content.decode()
