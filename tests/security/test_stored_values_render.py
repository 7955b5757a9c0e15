"""Pages render whatever is stored. SQLite keeps a budget of 1e30 although the column says 14 digits
(it was accepted before graph numbers were bounded); every page and API answer that loads the instance
used to fail with a 500 for everyone. PostgreSQL refuses such a value, so there the largest value the
column holds stands in."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from tests.conftest import halts_as_it_starts
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import ReviewItem, WorkflowInstance

PAGES = [
    "/", "/workflows/", "/workflows/{slug}/", "/instances/", "/instances/?q={id}", "/instances/{id}/",
    "/review/", "/review/{item}/", "/admin/workflows/workflowinstance/",
    "/admin/workflows/workflowinstance/{id}/change/", "/admin/workflows/reviewitem/?status__exact=open",
    "/admin/workflows/reviewitem/{item}/decide/", "/admin/workflows/auditentry/",
]
API = ["/api/instances/{id}", "/api/instances/{id}/events", "/api/instances/{id}/steps", "/api/dashboard"]


@pytest.fixture
def stored(db: None) -> tuple[WorkflowInstance, ReviewItem, str]:
    """A halted instance (its review item open) whose budget and cost columns hold a huge value."""
    version = save_version("huge-stored", halts_as_it_starts(budget_usd=5))
    instance = runtime.start_instance(version, {})
    item = ReviewItem.objects.get(instance=instance, status="open")
    huge = "1e30" if connection.vendor == "sqlite" else "99999999.999999"
    with connection.cursor() as cursor:
        table = WorkflowInstance._meta.db_table
        cursor.execute(f"UPDATE {table} SET budget_usd = {huge}, cost_usd = {huge} WHERE id = %s", [instance.pk])
    return instance, item, huge


def test_every_page_and_api_answer_renders_a_stored_huge_budget(stored: Any, django_user_model: Any) -> None:
    instance, item, huge = stored
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root"))
    for template in PAGES + API:
        url = template.format(slug="huge-stored", id=instance.pk, item=item.pk)
        response = client.get(url)
        assert response.status_code == 200, f"{url}: {response.status_code}"
    data = json.loads(client.get(f"/api/instances/{instance.pk}").content)
    assert data["cost_usd"] == float(huge)
    loaded = WorkflowInstance.objects.get(pk=instance.pk)
    assert float(loaded.budget_usd) == float(huge)


def test_an_operator_can_still_decide_the_instance(stored: Any, django_user_model: Any) -> None:
    instance, item, _ = stored
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root"))
    response = client.post(f"/api/instances/{instance.pk}/review", data={"action": "cancel"},
                           content_type="application/json")
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["instance"]["status"] == "cancelled"


def test_a_grant_that_would_overflow_the_column_is_refused_with_a_4xx(stored: Any, django_user_model: Any) -> None:
    instance, _, _ = stored
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root"))
    for grant in ({"extra_budget_usd": "1e30"}, {"extra_budget_usd": 1e30}, {"extra_transitions": 10**18},
                  {"extra_tokens": 10**18}, {"extra_budget_usd": "NaN"}):
        response = client.post(f"/api/instances/{instance.pk}/review", data={"action": "approve", **grant},
                               content_type="application/json")
        assert response.status_code == 400, (grant, response.content)
        assert json.loads(response.content)["message"]
