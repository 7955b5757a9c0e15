"""The review inbox (issue 13): the list's filters and sorting say what was wrong with a bad query, the
inbox API, the next open item, and what a decided item's page says (no bare "approved" after an edited
context, the audit's context diff as JSON rather than a Python repr)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.conftest import chain, past_deadline
from workflows import runtime
from workflows.models import ReviewItem
from workflows.operators import review

pytestmark = pytest.mark.django_db

HUMAN = {"id": "ask", "type": "human", "config": {"prompt": "Refund {{ context.amount }}?", "inputs": {
    "amount": {"type": "number", "minimum": 0, "description": "in EUR", "default": 3}}}}


@pytest.fixture
def items(make_version: Any, roles: Any) -> list[ReviewItem]:
    """A TTL halt (oldest) and a human task (newest), both open."""
    version = make_version(chain({"id": "nap", "type": "wait", "config": {"seconds": 60}}, settings={"ttl_s": 0.001}))
    halted = runtime.start_instance(version, {"ticket": "T-9"})
    assert runtime.expire_instance(halted.pk, now=past_deadline(halted))
    waiting = runtime.start_instance(make_version(chain(HUMAN)), {"amount": 12})
    # The halt's item is stamped with the (future) moment it expired: set the ages the test means.
    now = timezone.now()
    ReviewItem.objects.filter(instance=halted).update(created_at=now - timedelta(hours=2))
    ReviewItem.objects.filter(instance=waiting).update(created_at=now - timedelta(hours=1))
    return [ReviewItem.objects.get(instance=halted), ReviewItem.objects.get(instance=waiting)]


def rows(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<tr data-item="(\d+)"', html)]


def test_the_inbox_filters_and_sorts_by_reason_and_age(client: Any, items: list[ReviewItem], user_in: Any) -> None:
    client.force_login(user_in("viewers", "vic"))
    ttl, task = items
    assert rows(client.get("/review/").content.decode()) == [ttl.pk, task.pk]  # open: oldest first
    assert rows(client.get("/review/?sort=newest").content.decode()) == [task.pk, ttl.pk]
    assert rows(client.get("/review/?reason=human_task").content.decode()) == [task.pk]
    page = client.get("/review/?status=bogus&reason=nope").content.decode()
    assert ("&#x27;status&#x27; must be one of open, approved, rejected, cancelled, closed, "
            "not &#x27;bogus&#x27;: ignored") in page
    assert "&#x27;reason&#x27; must be one of" in page and "not &#x27;nope&#x27;" in page
    assert rows(page) == [task.pk, ttl.pk]  # ignored: every status, newest first


def test_the_inbox_api_counts_open_items_and_names_a_bad_filter(client: Any, items: list[ReviewItem],
                                                                user_in: Any) -> None:
    client.force_login(user_in("viewers", "vic"))
    data = client.get("/api/reviews").json()
    assert data["open"] == 2 and data["by_reason"] == {"ttl_expired": 1, "human_task": 1}
    assert [i["id"] for i in data["items"]] == [items[0].pk, items[1].pk]
    assert data["items"][1]["message"] == "Refund 12?" and data["items"][1]["assignee_group"] == "operators"
    assert client.get("/api/reviews?limit=0").json()["items"] == []
    bad = client.get("/api/reviews?reason=loop")
    assert bad.status_code == 400 and "'reason' must be one of" in bad.json()["message"]
    assert client.get("/api/reviews?limit=1000").status_code == 400


def test_next_opens_the_oldest_other_open_item_then_the_inbox(client: Any, items: list[ReviewItem],
                                                              user_in: Any) -> None:
    client.force_login(user_in("operators", "olga"))
    ttl, task = items
    response = client.get(f"/review/next/?after={ttl.pk}")
    assert response.status_code == 302 and response["Location"] == f"/review/{task.pk}/"
    assert client.get(f"/review/next/?after={task.pk}")["Location"] == f"/review/{ttl.pk}/"
    assert client.get(f"/review/next/?after={task.pk}&reason=human_task")["Location"] == reverse("review-list")
    # A decision made on the page moves on to the next open item.
    response = client.post(f"/review/{ttl.pk}/", {"action": "cancel"})
    assert response.status_code == 302 and response["Location"] == f"/review/next/?after={ttl.pk}"
    assert client.get(response["Location"])["Location"] == f"/review/{task.pk}/"


def test_an_edited_context_is_said_so_and_audited_as_json(client: Any, items: list[ReviewItem], user_in: Any) -> None:
    olga = user_in("operators", "olga")
    ttl = items[0]
    review.decide(ttl.pk, olga, review.Decision(action="edit_context", context={"ticket": "T-10", "x": 1},
                                                extra_ttl_s=60))
    client.force_login(olga)
    page = client.get(f"/review/{ttl.pk}/").content.decode()
    header = re.search(r'<span class="badge status-approved" id="item-status"[^>]*>([^<]*)</span>', page)
    assert header and header.group(1) == "approved with an edited context"
    assert "{&quot;added&quot;: [&quot;x&quot;], &quot;changed&quot;: [&quot;ticket&quot;], " \
           "&quot;removed&quot;: []}" in page
    assert "{&#x27;added&#x27;" not in page and "{'added'" not in page


def test_the_review_page_carries_why_and_the_decision_config(client: Any, items: list[ReviewItem],
                                                             user_in: Any) -> None:
    client.force_login(user_in("operators", "olga"))
    task = items[1]
    page = client.get(f"/review/{task.pk}/").content.decode()
    match = re.search(r'<script id="review-config" type="application/json">(.*?)</script>', page, re.S)
    assert match
    config = json.loads(match.group(1))
    assert config["canDecide"] is True and config["item"]["reason"] == "human_task"
    assert config["why"]["inputs"]["amount"]["description"] == "in EUR"
    assert config["instance"]["input"] == {"amount": 12}
    assert config["urls"]["decide"] == f"/api/instances/{task.instance_id}/review"
    assert "Keyboard: <kbd>a</kbd> approve" in page
    assert 'id="nav-review-count"' in page  # the navigation's inbox badge


def test_a_loop_halt_explains_its_path_with_visit_counts(client: Any, make_version: Any, user_in: Any) -> None:
    from dashboard.pages.review_facts import path_with_visits

    assert path_with_visits(["a", "b", "a"]) == [{"node": "a", "visit": 1}, {"node": "b", "visit": 1},
                                                 {"node": "a", "visit": 2}]
