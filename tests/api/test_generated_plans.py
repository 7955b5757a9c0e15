"""The planner's generated plan definitions (`<slug>--plan-<node>`) stay out of the workflow lists — the
page, v1 `GET workflows` and the instance filter — unless asked for (`generated`), and stay archived."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.api.conftest import SIMPLE
from workflows.authoring.definitions import save_version
from workflows.models import WorkflowDefinition, WorkflowVersion


@pytest.fixture
def generated(db: None) -> WorkflowDefinition:
    save_version("orders", SIMPLE)
    save_version("old", SIMPLE)
    WorkflowDefinition.objects.filter(slug="old").update(archived=True)
    definition = WorkflowDefinition.objects.create(slug="orders--plan-plan", name="Plans of plan", archived=True)
    WorkflowVersion.objects.create(definition=definition, number=1, graph=SIMPLE, message="plan")
    return definition


def page(client: Client, query: str = "") -> list[str]:
    response = client.get(f"/workflows/{query}")
    assert response.status_code == 200
    return [row["definition"].slug for row in response.context["rows"]]


def test_v1_lists_leave_generated_plans_out_unless_asked(as_role: Any, generated: WorkflowDefinition) -> None:
    api = as_role("viewer", "read")
    assert [w["slug"] for w in api.get("workflows").json()["items"]] == ["orders"]
    assert [w["slug"] for w in api.get("workflows?archived=true").json()["items"]] == ["old"]
    listed = api.get("workflows?generated=true").json()["items"]
    assert [(w["slug"], w["latest_version"]) for w in listed] == [("orders--plan-plan", 1)]
    # Still readable by name: the run report and the inspector link a plan's version.
    assert api.get("workflows/orders--plan-plan").status_code == 200


def test_the_pages_leave_generated_plans_out_unless_asked(people: dict[str, User],
                                                          generated: WorkflowDefinition) -> None:
    client = Client()
    client.force_login(people["designer"])
    assert page(client) == ["orders"]
    assert page(client, "?archived=1") == ["old"]
    assert page(client, "?generated=1") == ["orders--plan-plan"]
    assert "Archive" not in client.get("/workflows/?generated=1").content.decode().split("orders--plan-plan")[1]
    filter_choices = list(client.get("/instances/").context["workflows"])
    assert "orders--plan-plan" not in filter_choices and "orders" in filter_choices


def test_a_generated_definition_cannot_be_unarchived(people: dict[str, User], generated: WorkflowDefinition) -> None:
    client = Client()
    client.force_login(people["superuser"])
    response = client.post("/workflows/orders--plan-plan/archive", {"archived": "0"})
    assert response.status_code == 302
    generated.refresh_from_db()
    assert generated.archived
