"""Approvals from anywhere: a notice carries signed approve / reject / open links (workflows/triggers/
action_links.py); following one asks the logged-in approver to confirm (dashboard/pages/review_links.py), and
the inbox's rules still apply. Email, a signed webhook and a Slack-compatible message carry them."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import pytest
from django.core import mail, signing
from django.utils import timezone

from tests.conftest import chain
from tests.triggers.test_notifications import HUMAN, NAP, receiver  # noqa: F401 - the receiver fixture
from workflows import runtime
from workflows.models import AuditEntry, ReviewItem
from workflows.triggers import action_links, notifications
from workflows.triggers.models import NotificationChannel

pytestmark = pytest.mark.django_db


def halted(make_version: Any, capture: Any, slug: str = "napper") -> ReviewItem:
    instance = runtime.start_instance(make_version(NAP, slug=slug), {})
    with capture(execute=True):
        assert runtime.expire_instance(instance.pk, timezone.now() + timedelta(hours=1))
    return ReviewItem.objects.get(instance=instance, status="open")


def path_of(url: str) -> str:
    return urlparse(url).path


def test_email_carries_links_and_the_approver_confirms_after_login(
        settings: Any, make_version: Any, django_capture_on_commit_callbacks: Any, redis_conn: Any,
        client: Any, user_in: Any, roles: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "BASE_URL": "https://flow.example.com"}
    NotificationChannel.objects.create(name="ops", kind="email", target="ops@example.com", events=["review"])
    item = halted(make_version, django_capture_on_commit_callbacks)
    assert notifications.deliver_pending() == 1
    body = mail.outbox[0].body
    approve = next(line.split(": ", 1)[1] for line in body.splitlines() if line.strip().startswith("Approve:"))
    assert approve.startswith("https://flow.example.com/review/act/")

    anonymous = client.get(path_of(approve))
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")

    client.force_login(user_in("operators", "olga"))
    page = client.get(path_of(approve))
    assert page.status_code == 200 and b"Approve review item" in page.content and b'id="act-confirm"' in page.content
    item.refresh_from_db()
    assert item.status == "open"  # a GET (a mail scanner's preview) decides nothing

    done = client.post(path_of(approve), {"note": "fine by me"})
    assert done.status_code == 302 and done["Location"] == f"/review/{item.pk}/"
    item.refresh_from_db()
    assert item.status == "approved" and item.decided_by.username == "olga" and item.note == "fine by me"
    assert AuditEntry.objects.filter(instance=item.instance, actor__username="olga").exists()

    again = client.post(path_of(approve), {})
    assert again.status_code == 409 and b"Already decided" in again.content and b"olga" in again.content


def test_links_cannot_be_forged_redirected_or_used_late(settings: Any, make_version: Any, client: Any,
                                                        django_capture_on_commit_callbacks: Any, user_in: Any,
                                                        roles: Any) -> None:
    item = halted(make_version, django_capture_on_commit_callbacks)
    client.force_login(user_in("operators", "olga"))
    token = action_links.token_for(item.pk, "reject")
    for bad in (token[:-2] + "xx", signing.dumps([item.pk, "approve"], salt="another-salt"),
                signing.dumps([item.pk, "delete"], salt=action_links.SALT)):
        response = client.post(f"/review/act/{bad}/", {})
        assert response.status_code == 400 and b"not valid" in response.content
    settings.STEADYFLOW = {**settings.STEADYFLOW, "ACTION_LINK_TTL_S": 60}
    with pytest.MonkeyPatch.context() as patch:  # a link signed five minutes ago
        patch.setattr(signing.TimestampSigner, "timestamp", lambda self: signing.b62_encode(int(
            (timezone.now() - timedelta(minutes=5)).timestamp())))
        old = signing.dumps([item.pk, "reject"], salt=action_links.SALT, compress=True)
    response = client.post(f"/review/act/{old}/", {})
    assert response.status_code == 400 and b"expired" in response.content
    item.refresh_from_db()
    assert item.status == "open"
    opened = client.get(action_links.path_for(item.pk, "open"))
    assert opened.status_code == 302 and opened["Location"] == f"/review/{item.pk}/"


def test_the_inbox_rules_still_apply(make_version: Any, client: Any, user_in: Any, roles: Any) -> None:
    version = make_version(chain({"id": "ask", "type": "human", "config": {
        "prompt": "Refund?", "inputs": {"amount": {"type": "number"}}}}), slug="refunds")
    instance = runtime.start_instance(version, {})
    item = ReviewItem.objects.get(instance=instance, reason="human_task")
    approve, reject = action_links.path_for(item.pk, "approve"), action_links.path_for(item.pk, "reject")
    client.force_login(user_in("viewers", "vera"))
    assert b"You cannot decide this item" in client.get(reject).content
    assert client.post(reject, {}).status_code == 403
    client.force_login(user_in("operators", "olga"))
    page = client.get(approve)
    assert b'id="act-needs-form"' in page.content and b"amount" in page.content
    assert b'id="act-confirm"' not in page.content
    refused = client.post(approve, {})  # a crafted POST still meets the task's form: nothing applies
    item.refresh_from_db()
    assert refused.status_code == 400 and b"input &#x27;amount&#x27; is required" in refused.content
    assert item.status == "open"
    assert client.post(reject, {}).status_code == 302
    item.refresh_from_db()
    assert item.status == "rejected" and item.instance.steps.get(node_id="ask").output["approved"] is False


def test_a_slack_channel_and_a_webhook_carry_the_links(receiver: Any, make_version: Any,  # noqa: F811
                                                       django_capture_on_commit_callbacks: Any) -> None:
    NotificationChannel.objects.create(name="chat", kind="slack", target=receiver.url, events=["human_task"])
    NotificationChannel.objects.create(name="hook", kind="webhook", target=receiver.url, events=["human_task"])
    with django_capture_on_commit_callbacks(execute=True):
        instance = runtime.start_instance(make_version(HUMAN, slug="shipper"), {})
    item = ReviewItem.objects.get(instance=instance, reason="human_task")
    assert notifications.deliver_pending() == 2
    bodies = [json.loads(body) for _, body in receiver.seen]
    slack = next(b for b in bodies if "blocks" in b)
    hook = next(b for b in bodies if "blocks" not in b)
    assert slack["text"].startswith(f"[Steadyflow] shipper instance {instance.pk} is waiting on a human task")
    buttons = {e["text"]["text"]: e["url"] for e in slack["blocks"][1]["elements"]}
    assert set(buttons) == {"Approve", "Reject", "Open"}
    assert buttons == {"Approve": hook["actions"]["approve"], "Reject": hook["actions"]["reject"],
                       "Open": hook["actions"]["open"]}
    assert action_links.read(path_of(buttons["Reject"]).split("/")[3]) == action_links.ActionLink(item.pk, "reject")
    slack_headers = next(h for h, body in receiver.seen if b"blocks" in body)
    assert "steadyflow-signature" not in slack_headers  # Slack's URL is its secret; webhooks stay signed
