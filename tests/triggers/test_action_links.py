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


def approver_links(body: str) -> dict[str, str]:
    return {line.split(":", 1)[0].strip(): line.split(": ", 1)[1].strip() for line in body.splitlines()
            if line.strip().startswith(("Approve:", "Reject:"))}


def test_an_emailed_approver_decides_without_an_account(settings: Any, make_version: Any, client: Any,
                                                        django_capture_on_commit_callbacks: Any,
                                                        redis_conn: Any, roles: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "BASE_URL": "https://flow.example.com"}
    channel = NotificationChannel.objects.create(name="approvers", kind="email", events=["review"],
                                                 target="ann@example.com, bo@example.com",
                                                 approver_group="operators")
    item = halted(make_version, django_capture_on_commit_callbacks)
    assert notifications.deliver_pending() == 1
    ann_mail, bo_mail = sorted(mail.outbox, key=lambda m: m.to[0])
    assert ann_mail.to == ["ann@example.com"] and bo_mail.to == ["bo@example.com"]
    ann, bo = approver_links(ann_mail.body), approver_links(bo_mail.body)
    assert ann["Approve"] != bo["Approve"]  # each recipient's links are their own
    assert action_links.read(path_of(ann["Approve"]).split("/")[3]).recipient == "ann@example.com"

    page = client.get(path_of(ann["Approve"]))  # no login
    assert page.status_code == 200 and b'id="act-confirm"' in page.content and b"ann@example.com" in page.content
    item.refresh_from_db()
    assert item.status == "open"
    done = client.post(path_of(ann["Approve"]), {"note": "ok from my phone"})
    assert done.status_code == 200 and b'id="act-done"' in done.content
    item.refresh_from_db()
    assert item.status == "approved" and item.decided_by.username == "email:ann@example.com"
    assert not item.decided_by.is_active and not item.decided_by.has_usable_password()
    entry = AuditEntry.objects.get(instance=item.instance, review=item)
    assert entry.actor.username == "email:ann@example.com" and entry.note == "ok from my phone"
    again = client.post(path_of(bo["Reject"]), {})  # single-use: the item is decided
    assert again.status_code == 409 and b"email:ann@example.com" in again.content

    # A second halt: a recipient taken off the channel, or a channel that stops naming approvers, or an
    # item of another group, refuses the link.
    other = halted(make_version, django_capture_on_commit_callbacks, slug="napper-two")
    removed = action_links.path_for(other.pk, "approve", "bo@example.com", channel.pk)
    channel.target = "ann@example.com"
    channel.save()
    refused = client.post(removed, {})
    assert refused.status_code == 403 and b"no longer a recipient" in refused.content
    channel.approver_group = "finance"
    channel.save()
    wrong_group = client.post(action_links.path_for(other.pk, "approve", "ann@example.com", channel.pk), {})
    assert wrong_group.status_code == 403 and b"for the group &#x27;operators&#x27;" in wrong_group.content
    channel.approver_group = ""
    channel.save()
    assert client.post(action_links.path_for(other.pk, "reject", "ann@example.com", channel.pk), {}).status_code == 403
    other.refresh_from_db()
    assert other.status == "open"


def test_an_emailed_approver_cannot_skip_a_tasks_form(make_version: Any, client: Any, roles: Any) -> None:
    version = make_version(chain({"id": "ask", "type": "human", "config": {
        "prompt": "Refund?", "inputs": {"amount": {"type": "number"}}}}), slug="refunds-by-mail")
    instance = runtime.start_instance(version, {})
    item = ReviewItem.objects.get(instance=instance, reason="human_task")
    channel = NotificationChannel.objects.create(name="mail", kind="email", target="ann@example.com",
                                                 events=["human_task"], approver_group="operators")
    approve = action_links.path_for(item.pk, "approve", "ann@example.com", channel.pk)
    assert b'id="act-needs-form"' in client.get(approve).content
    refused = client.post(approve, {})
    item.refresh_from_db()
    assert refused.status_code == 400 and b"input &#x27;amount&#x27; is required" in refused.content
    assert item.status == "open"
    assert client.post(action_links.path_for(item.pk, "reject", "ann@example.com", channel.pk), {}).status_code == 200
    item.refresh_from_db()
    assert item.status == "rejected" and item.decided_by.username == "email:ann@example.com"


def test_the_admin_sets_approvers_on_email_channels_only(client: Any, admin_user: Any) -> None:
    client.force_login(admin_user)
    url = "/admin/workflows/notificationchannel/add/"
    base = {"name": "c", "target": "ann@example.com", "events": '["review"]', "enabled": "on"}
    refused = client.post(url, {**base, "kind": "webhook", "target": "https://hooks.example.com/x",
                                "approver_group": "operators"})
    assert refused.status_code == 200 and b"only an email channel" in refused.content
    made = client.post(url, {**base, "kind": "email", "approver_group": "operators"})
    assert made.status_code == 302
    assert NotificationChannel.objects.get(name="c").approver_group == "operators"
