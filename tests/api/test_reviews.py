"""v1 review items: list with filters, get, decide, under the dashboard's rules (the decide permission,
a human task's assignee group, the four-eyes rule, one decision per item)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import override_settings

from tests.api.conftest import HUMAN, assert_problem
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import ReviewItem


def open_task(user: User | None = None) -> ReviewItem:
    instance = runtime.start_instance(save_version("human", HUMAN), {}, user=user)
    return ReviewItem.objects.get(instance=instance, status="open")


def test_list_and_get(as_role: Any) -> None:
    first, second = open_task(), open_task()
    api = as_role("viewer")
    listed = api.get("reviews").json()
    assert [i["id"] for i in listed["items"]] == [second.pk, first.pk] and listed["next_cursor"] is None
    page = api.get("reviews?limit=1").json()
    assert [i["id"] for i in page["items"]] == [second.pk]
    assert [i["id"] for i in api.get(f"reviews?limit=1&cursor={page['next_cursor']}").json()["items"]] == [first.pk]
    # The cursor is opaque, as the instance list's: a made-up one is a 422 naming the field.
    assert isinstance(page["next_cursor"], str) and page["next_cursor"] != str(second.pk)
    refused = api.get(f"reviews?cursor={first.pk}")
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "query.cursor"
    assert api.get("reviews?reason=ttl_expired").json()["items"] == []
    assert [i["id"] for i in api.get(f"reviews?instance={first.instance_id}").json()["items"]] == [first.pk]
    assert api.get("reviews?workflow=human&status=approved").json()["items"] == []
    item = api.get(f"reviews/{first.pk}").json()
    assert item["reason"] == "human_task" and item["assignee_group"] == "finance" and item["can_decide"] is False
    assert_problem(api.get("reviews/999999"), 404, "review item 999999 does not exist")
    assert_problem(api.get("reviews?status=maybe"), 422)


def test_decide_with_the_uis_rules(as_role: Any) -> None:
    item = open_task()
    assert_problem(as_role("outsider").post(f"reviews/{item.pk}/decide", {"action": "approve"}), 403,
                   "only members of the group 'finance'")
    assert_problem(as_role("operator", "read").post(f"reviews/{item.pk}/decide", {"action": "approve"}), 403,
                   "'operate' scope")
    assert_problem(as_role("viewer").post(f"reviews/{item.pk}/decide", {"action": "approve"}), 403,
                   "decide_reviewitem")
    operator = as_role("operator")
    assert_problem(operator.post(f"reviews/{item.pk}/decide", {"action": "dance"}), 400, "unknown action")
    decided = operator.post(f"reviews/{item.pk}/decide", {"action": "approve", "note": "ok"})
    assert decided.status_code == 200 and decided.json()["status"] == "approved"
    assert decided.json()["decided_by"] == "operator"
    assert_problem(operator.post(f"reviews/{item.pk}/decide", {"action": "reject"}), 409, "already approved")
    assert_problem(operator.post("reviews/999999/decide", {"action": "approve"}), 404)
    assert_problem(operator.post(f"reviews/{item.pk}/decide", {}), 422)


@override_settings(STEADYFLOW={**__import__("django.conf").conf.settings.STEADYFLOW, "REVIEW_FOUR_EYES": True})
def test_four_eyes(people: dict[str, User], as_role: Any) -> None:
    item = open_task(user=people["operator"])
    assert_problem(as_role("operator").post(f"reviews/{item.pk}/decide", {"action": "approve"}), 403, "four-eyes")
    assert as_role("superuser").post(f"reviews/{item.pk}/decide", {"action": "approve"}).status_code == 200
