"""The review inbox's bulk decision (POST /api/reviews/decide, dashboard/api/review_bulk.py): many items
approved or rejected at once, each checked as from its own page; one that cannot be decided is named
and does not stop the others."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.conftest import chain, past_deadline
from workflows import runtime
from workflows.models import ReviewItem

pytestmark = pytest.mark.django_db

URL = "/api/reviews/decide"


def halted(make_version: Any, n: int) -> list[ReviewItem]:
    version = make_version(chain({"id": "nap", "type": "wait", "config": {"seconds": 60}}, settings={"ttl_s": 0.001}))
    items = []
    for _ in range(n):
        instance = runtime.start_instance(version, {})
        assert runtime.expire_instance(instance.pk, now=past_deadline(instance))
        items.append(ReviewItem.objects.get(instance=instance))
    return items


def post(client: Client, body: Any) -> Any:
    return client.post(URL, data=json.dumps(body), content_type="application/json")


def test_bulk_reject_and_approve(make_version: Any, user_in: Any) -> None:
    items = halted(make_version, 3)
    client = Client()
    client.force_login(user_in("operators", "olga"))
    answer = post(client, {"items": [items[0].pk, items[1].pk, 999_999], "action": "reject"})
    assert answer.status_code == 200
    assert answer.json() == {"action": "reject", "decided": [items[0].pk, items[1].pk],
                             "failed": [{"item": 999_999, "message": "review item 999999 does not exist"}]}
    statuses = dict(ReviewItem.objects.values_list("pk", "status"))
    assert [statuses[i.pk] for i in items] == ["rejected", "rejected", "open"]
    again = post(client, {"items": [items[0].pk, items[2].pk], "action": "approve"}).json()
    assert again["decided"] == [items[2].pk] and again["failed"][0]["item"] == items[0].pk
    assert ReviewItem.objects.get(pk=items[2].pk).status == "approved"


@pytest.mark.parametrize(("body", "message"), [
    ({"items": [], "action": "approve"}, "'items' must be a list"),
    ({"items": [1, "2"], "action": "approve"}, "'items' must be a list"),
    ({"items": list(range(101)), "action": "approve"}, "'items' must be a list"),
    ({"items": [1], "action": "reroute"}, "'action' must be one of approve, reject"),
    ({"items": [1], "action": "approve", "note": 5}, "'note' must be a string"),
    ([1], "must be a JSON object"),
])
def test_bulk_refuses_bad_requests_naming_the_problem(user_in: Any, body: Any, message: str) -> None:
    client = Client()
    client.force_login(user_in("operators", "olga"))
    response = post(client, body)
    assert response.status_code == 400 and message in response.json()["message"]


def test_bulk_is_for_deciders(make_version: Any, user_in: Any) -> None:
    (item,) = halted(make_version, 1)
    viewer = Client()
    viewer.force_login(user_in("viewers", "vic"))
    assert post(viewer, {"items": [item.pk], "action": "reject"}).status_code == 403
    assert post(Client(), {"items": [item.pk], "action": "reject"}).status_code == 401
    assert ReviewItem.objects.get(pk=item.pk).status == "open"
