"""The review queue pages (dashboard and Django admin): permissions, decisions, conflicts."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.conftest import chain, past_deadline
from workflows import runtime
from workflows.models import AuditEntry, ReviewItem

pytestmark = pytest.mark.django_db


@pytest.fixture
def halted_item(make_version, roles):
    """An instance halted by its TTL, with its open review item."""
    version = make_version(chain({"id": "nap", "type": "wait", "config": {"seconds": 60}},
                                 {"id": "after", "type": "wait", "config": {"seconds": 0}},
                                 settings={"ttl_s": 0.001}))
    instance = runtime.start_instance(version, {"ticket": "T-9"})
    assert runtime.expire_instance(instance.pk, now=past_deadline(instance))
    return ReviewItem.objects.get(instance=instance)


def test_anonymous_users_are_sent_to_login(client, halted_item):
    for url in (reverse("review-list"), reverse("review-detail", args=[halted_item.pk])):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_user_without_a_role_gets_403(client, halted_item, django_user_model):
    client.force_login(django_user_model.objects.create_user("nobody", password="pw"))
    assert client.get(reverse("review-list")).status_code == 403


def test_viewer_sees_the_item_but_cannot_decide(client, halted_item, user_in):
    client.force_login(user_in("viewers", "vera"))
    page = client.get(reverse("review-detail", args=[halted_item.pk]))
    assert page.status_code == 200
    assert b"You cannot decide this item: permission denied: you need workflows.decide_reviewitem (the operators " \
        b"group)" in page.content and b"Apply decision" not in page.content
    response = client.post(reverse("review-detail", args=[halted_item.pk]), {"action": "approve"})
    assert response.status_code == 403
    halted_item.refresh_from_db()
    assert halted_item.status == "open"


def test_open_items_are_listed_oldest_first(client, halted_item, user_in):
    client.force_login(user_in("viewers", "vera"))
    page = client.get(reverse("review-list"))
    assert page.status_code == 200
    assert f"#{halted_item.instance_id}".encode() in page.content
    assert b"ttl_expired" in page.content or b"Ttl Expired" in page.content


def test_operator_edits_context_and_continues_with_the_diff_audited(client, halted_item, user_in):
    client.force_login(user_in("operators", "olga"))
    url = reverse("review-detail", args=[halted_item.pk])
    page = client.get(url)
    assert b"Apply decision" in page.content and b"review-graph" in page.content
    response = client.post(url, {"action": "edit_context", "context": json.dumps({"ticket": "T-10", "x": 1}),
                                 "extra_ttl_s": "120", "note": "fixed the ticket"})
    assert response.status_code == 302
    halted_item.refresh_from_db()
    assert halted_item.status == "approved" and halted_item.note == "fixed the ticket"
    instance = halted_item.instance
    instance.refresh_from_db()
    assert instance.status == "running" and instance.context == {"ticket": "T-10", "x": 1}
    audit = AuditEntry.objects.get(review=halted_item)
    assert audit.actor.username == "olga"
    assert audit.after["context_diff"] == {"added": ["x"], "removed": [], "changed": ["ticket"]}
    # A second decision on the same item is refused with a clear message.
    again = client.post(url, {"action": "reject"}, follow=True)
    assert b"already approved by olga" in again.content


def test_invalid_context_json_is_a_form_error(client, halted_item, user_in):
    client.force_login(user_in("operators", "olga"))
    response = client.post(reverse("review-detail", args=[halted_item.pk]),
                           {"action": "edit_context", "context": "{not json"})
    assert response.status_code == 200
    assert b"not valid JSON" in response.content
    response = client.post(reverse("review-detail", args=[halted_item.pk]),
                           {"action": "edit_context", "context": "[1, 2]"})
    assert b"the context must be a JSON object" in response.content
    response = client.post(reverse("review-detail", args=[halted_item.pk]), {"action": "reroute"})
    assert b"choose the node to continue from" in response.content


def test_reroute_from_the_dashboard(client, halted_item, user_in):
    client.force_login(user_in("operators", "olga"))
    client.post(reverse("review-detail", args=[halted_item.pk]), {"action": "reroute", "goto": "after",
                                                                  "extra_ttl_s": "60"})
    instance = halted_item.instance
    assert instance.steps.get(node_id="after").status == "queued"
    assert instance.steps.get(node_id="nap").status == "cancelled"


def test_admin_changelist_defaults_to_open_items_and_decides(client, halted_item, user_in, admin_user):
    client.force_login(admin_user)
    url = reverse("admin:workflows_reviewitem_changelist")
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].endswith("?status__exact=open")
    page = client.get(response["Location"])
    assert page.status_code == 200 and b"Decide" in page.content
    decide = reverse("admin:workflows_reviewitem_decide", args=[halted_item.pk])
    assert client.get(decide).status_code == 200
    response = client.post(decide, {"action": "approve", "extra_transitions": "5", "extra_ttl_s": "60"})
    assert response.status_code == 302
    instance = halted_item.instance
    instance.refresh_from_db()
    assert instance.status == "running" and instance.max_transitions == 15


def test_admin_bulk_reject(client, make_version, admin_user, roles):
    version = make_version(chain({"id": "nap", "type": "wait", "config": {"seconds": 60}},
                                 settings={"ttl_s": 0.001}))
    items = []
    for _ in range(3):
        instance = runtime.start_instance(version, {})
        assert runtime.expire_instance(instance.pk, now=past_deadline(instance))
        items.append(ReviewItem.objects.get(instance=instance))
    client.force_login(admin_user)
    changelist = reverse("admin:workflows_reviewitem_changelist") + "?status__exact=open"
    selected = {"action": "reject_selected", "_selected_action": [i.pk for i in items]}
    # First a confirmation naming what will fail; nothing is decided yet.
    asked = client.post(changelist, selected)
    assert asked.status_code == 200 and "cannot be undone" in asked.content.decode()
    assert all(f"instance #{i.instance_id}" in asked.content.decode() for i in items)
    assert set(ReviewItem.objects.filter(pk__in=[i.pk for i in items]).values_list("status", flat=True)) == {"open"}
    response = client.post(changelist, {**selected, "post": "yes"})
    assert response.status_code == 302
    assert set(ReviewItem.objects.filter(pk__in=[i.pk for i in items]).values_list("status", flat=True)) == \
        {"rejected"}
    assert {i.instance.status for i in ReviewItem.objects.filter(pk__in=[i.pk for i in items])} == {"failed"}


def test_human_task_form_has_a_field_per_declared_input(client, make_version, user_in, roles):
    version = make_version(chain({"id": "ask", "type": "human", "config": {
        "prompt": "Refund {{ context.amount }}?",
        "inputs": {"reason": {"type": "string"}, "amount": {"type": "number", "minimum": 0},
                   "tags": {"type": "array"}}}}))
    instance = runtime.start_instance(version, {"amount": 12})
    instance.refresh_from_db()
    assert instance.status == "waiting"
    item = ReviewItem.objects.get(instance=instance, reason="human_task")
    assert item.details["prompt"] == "Refund 12?"
    client.force_login(user_in("operators", "olga"))
    url = reverse("review-detail", args=[item.pk])
    page = client.get(url).content.decode()
    for name in ("input_reason", "input_amount", "input_tags"):
        assert f'name="{name}"' in page
    bad = client.post(url, {"action": "approve", "input_reason": "ok", "input_amount": "-3", "input_tags": "[]"})
    assert b"input &#x27;amount&#x27;" in bad.content or b"input 'amount'" in bad.content
    client.post(url, {"action": "approve", "input_reason": "ok", "input_amount": "3.5", "input_tags": '["a"]'})
    step = instance.steps.get(node_id="ask")
    assert step.status == "succeeded"
    assert step.output == {"reason": "ok", "amount": 3.5, "tags": ["a"], "approved": True, "answered_by": "olga",
                           "note": ""}
