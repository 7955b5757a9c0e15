"""Every admin page answers (no 500): each registered model's changelist, add and change pages, for a
superuser, with rows present. The engine's records (instances, step runs, events, checkpoints, breaker
states) are written by the runtime only: nobody adds them from the admin."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client
from django.urls import get_resolver, reverse

from tests.conftest import chain, halts_as_it_starts
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import BreakerState, Checkpoint, Event, ReviewItem, StepRun, WorkflowInstance

pytestmark = pytest.mark.django_db

READ_ONLY = (WorkflowInstance, StepRun, Event, Checkpoint, BreakerState)


@pytest.fixture
def superuser_client() -> Client:
    user = User.objects.create_superuser("root", password="pw-123456")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def rows(redis_conn: Any) -> WorkflowInstance:
    """An instance with a step run, events and a checkpoint (and a definition with a version)."""
    graph = chain({"id": "work", "type": "python", "config": {"function": "noop"}})
    version = save_version("admin-flow", graph)
    instance = runtime.start_instance(version, {"n": 1})
    # A loop-breaker halt as it starts: a review item to list and open.
    runtime.start_instance(save_version("admin-halts", halts_as_it_starts()), {})
    assert ReviewItem.objects.exists()
    BreakerState.objects.create(key="scripted")
    return instance


def admin_url(model: Any, page: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{page}", args=args)


def registered() -> list[Any]:
    # The admin modules register when the URLconf loads (dashboard/urls.py: admin.autodiscover): load it
    # first, or a worker whose earlier tests never resolved a URL finds nothing registered.
    get_resolver().url_patterns  # noqa: B018 - imports the URLconf
    return [model for model in admin.site._registry if model._meta.app_label in ("workflows", "dashboard")]


def test_every_admin_page_answers(superuser_client: Client, rows: WorkflowInstance) -> None:
    assert registered()
    for model in registered():
        changelist = superuser_client.get(admin_url(model, "changelist"), follow=True)
        assert changelist.status_code == 200, (model, changelist.status_code)
        add = superuser_client.get(admin_url(model, "add"))
        assert add.status_code in (200, 403), (model, add.status_code)
        # Submitting the add form empty: the form's errors (or a refusal), never a 500.
        posted = superuser_client.post(admin_url(model, "add"), {})
        assert posted.status_code in (200, 403), (model, posted.status_code)
        first = model.objects.order_by("pk").first()
        if first is not None:
            change = superuser_client.get(admin_url(model, "change", first.pk))
            assert change.status_code == 200, (model, change.status_code)


@pytest.mark.parametrize("model", READ_ONLY, ids=lambda m: m.__name__)
def test_the_engines_records_cannot_be_added_from_the_admin(superuser_client: Client, rows: WorkflowInstance,
                                                            model: Any) -> None:
    assert superuser_client.get(admin_url(model, "add")).status_code == 403
    # Posting the add form is refused too (it used to fail with a 500 on the missing columns).
    assert superuser_client.post(admin_url(model, "add"), {}).status_code == 403
    changelist = superuser_client.get(admin_url(model, "changelist"))
    assert admin_url(model, "add") not in changelist.content.decode()


def test_a_decision_in_the_admin_leaves_the_open_list_at_once(superuser_client: Client, rows: WorkflowInstance) -> None:
    item = ReviewItem.objects.get()
    listing = superuser_client.get(reverse("admin:workflows_reviewitem_changelist"), follow=True)
    decide_url = reverse("admin:workflows_reviewitem_decide", args=[item.pk])
    assert decide_url in listing.content.decode()
    response = superuser_client.post(decide_url, {"action": "approve", "extra_transitions": "0", "note": "go"},
                                     follow=True)
    assert response.redirect_chain[-1][0].endswith("?status__exact=open")
    html = response.content.decode()
    assert f"eview item {item.pk}: approve applied" in html and decide_url not in html
    # No more transitions granted: the resumed activation halts again at once, in a new item, said so.
    (again,) = ReviewItem.objects.filter(status="open")
    assert again.pk != item.pk
    assert f"is waiting for review again: item {again.pk} (loop_breaker)" in html
    assert reverse("admin:workflows_reviewitem_decide", args=[again.pk]) in html
