"""The instance list's search in the start input and the context (dashboard/pages/views.py `q`), on whichever
database the suite runs (SQLite by default, PostgreSQL with DATABASE_URL: the jsonb cast to text), its
bounds, the JSON rows the page refreshes from, and the first-run dashboard and empty states."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client

from dashboard.pages import views
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import WorkflowInstance

pytestmark = pytest.mark.django_db

VIEWER = ("view_workflowinstance",)
GRAPH = {"nodes": [{"id": "start", "type": "start"}, {"id": "end", "type": "end"}],
         "edges": [{"source": "start", "target": "end"}]}


@pytest.fixture
def client_for(django_user_model: Any) -> Callable[..., Client]:
    made = {"n": 0}

    def make(*codenames: str) -> Client:
        made["n"] += 1
        user = django_user_model.objects.create_user(f"searcher{made['n']}")
        user.user_permissions.add(*Permission.objects.filter(content_type__app_label="workflows",
                                                             codename__in=codenames))
        client = Client()
        client.force_login(user)
        return client

    return make


def started(start_input: dict[str, Any], context: dict[str, Any] | None = None) -> WorkflowInstance:
    version = save_version("searchable", GRAPH, message="v1")
    instance = runtime.start_instance(version, start_input)
    if context is not None:
        WorkflowInstance.objects.filter(pk=instance.pk).update(context=context)
    return instance


def ids(client: Client, query: str) -> list[int]:
    html = client.get("/instances/", {"q": query}).content.decode()
    return [int(i) for i in re.findall(r'<td><a href="/instances/(\d+)/">', html)]


def test_search_finds_text_in_the_input_and_the_context(client_for: Callable[..., Client]) -> None:
    order = started({"customer": "ada@example.com", "question": "Where is my order R-1001?"})
    other = started({"customer": "bob@example.com", "question": "Opening hours?"},
                    context={"ticket": {"priority": "urgent", "tags": ["vip-lounge"]}})
    accented = started({"city": "Zürich", "quote": 'he said "hi"'})
    client = client_for(*VIEWER)
    print("database:", connection.vendor)

    assert ids(client, "R-1001") == [order.pk]
    assert ids(client, "ada@example") == [order.pk]
    assert ids(client, "WHERE IS MY") == [order.pk]             # case-insensitive
    assert ids(client, "vip-lounge") == [other.pk]              # in the context
    assert ids(client, "example.com") == [other.pk, order.pk]   # newest first
    assert ids(client, "Zürich") == [accented.pk]               # SQLite stores it escaped (\\u00fc)
    assert ids(client, 'said "hi"') == [accented.pk]            # a quote, escaped in the JSON text
    assert ids(client, "nothing like this") == []
    # Ids and trace ids still work as before.
    assert ids(client, str(other.pk)) == [other.pk]
    assert ids(client, other.trace_id.split("-")[1]) == [other.pk]
    # The designer-visible hint says what the search covers.
    html = client.get("/instances/").content.decode()
    assert "any\n    text in its start input or context" in html or "text in its start input or context" in html


def test_search_is_bounded_to_the_newest_instances_and_its_length(client_for: Callable[..., Client],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    old = started({"note": "needle"})
    new = [started({"note": f"hay {i}"}) for i in range(3)]
    client = client_for(*VIEWER)
    assert ids(client, "needle") == [old.pk]
    monkeypatch.setattr(views, "SEARCH_NEWEST", 3)   # only the three newest are read
    assert ids(client, "needle") == []
    assert ids(client, "hay") == [n.pk for n in reversed(new)]
    too_long = client.get("/instances/", {"q": "x" * 500}).content.decode()
    assert "the search text is cut to its first 200 characters" in too_long


def test_the_list_answers_its_rows_as_json_for_the_live_refresh(client_for: Callable[..., Client]) -> None:
    inst = started({"customer": "ada"})
    data = client_for(*VIEWER).get("/instances/", {"q": "ada", "format": "json"}).json()
    assert data["count"] == 1 and data["page"] == 1
    row = data["instances"][0]
    assert row["id"] == inst.pk and row["url"] == f"/instances/{inst.pk}/" and row["workflow"] == "searchable"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \w+", row["created_at"])
    assert client_for().get("/instances/", {"format": "json"}).status_code == 403


def test_empty_lists_say_what_to_do(client_for: Callable[..., Client]) -> None:
    client = client_for(*VIEWER)
    html = client.get("/instances/").content.decode()
    assert 'id="instances-empty"' in html and "No workflow has run yet" in html
    started({"x": 1})
    html = client.get("/instances/", {"q": "no such text"}).content.decode()
    assert "No instance matches these filters" in html and 'id="instances-empty"' not in html


def test_a_newcomers_dashboard_offers_the_loaded_examples(client_for: Callable[..., Client]) -> None:
    from django.core.management import call_command

    client = client_for(*VIEWER, "add_workflowinstance")
    html = client.get("/").content.decode()
    assert 'id="first-run"' in html and "The examples are not loaded" in html
    call_command("load_examples", stdout=open("/dev/null", "w"))
    html = client.get("/").content.decode()
    for slug in ("react-agent", "industry-report", "hallucination-loop", "refund-saga"):
        assert f'data-url="/api/workflows/{slug}/instances"' in html, slug
        assert f'href="/workflows/{slug}/edit/"' in html
    assert "Where is my order 42?" in html  # the declared defaults it runs with
    # A viewer cannot start: no run buttons, and a word on why.
    viewer_html = client_for(*VIEWER).get("/").content.decode()
    assert "run-example" not in viewer_html and "needs the designers or operators group" in viewer_html
    started({"x": 1})
    # After the first run the examples stay, under a plain heading, each still one click from running.
    html = client.get("/").content.decode()
    assert 'id="first-run"' in html and ">Examples</h2>" in html and "Run your first workflow" not in html
    assert 'data-url="/api/workflows/react-agent/instances"' in html


def test_the_halt_reason_filter_keeps_instances_whose_item_was_decided(client_for: Callable[..., Client]) -> None:
    from workflows.models import ReviewItem

    halted = started({"n": 1})
    answered = started({"n": 2})
    started({"n": 3})  # never halted
    WorkflowInstance.objects.filter(pk=halted.pk).update(status="halted", halt_reason="ttl_expired")
    # Decided: the instance runs on and its halt_reason is cleared, but it did halt for that reason.
    ReviewItem.objects.create(instance=answered, reason="ttl_expired", status="approved", node_id="start")
    html = client_for(*VIEWER).get("/instances/", {"reason": "ttl_expired"}).content.decode()
    listed = sorted(int(i) for i in re.findall(r'<td><a href="/instances/(\d+)/">', html))
    assert listed == sorted([halted.pk, answered.pk])


def test_search_finds_what_a_transition_wrote_to_the_context(client_for: Callable[..., Client]) -> None:
    """The context a step changes lives in its state delta and the snapshots, not the row's column
    (docs/DESIGN.md "State: deltas and snapshots"): the search looks there too."""
    from django.db import transaction
    from django.utils import timezone

    changed = started({"customer": "cy@example.com"})
    untouched = started({"customer": "di@example.com"})
    with transaction.atomic():
        inst = runtime.lock(changed.pk)
        unit = runtime.UnitOfWork(inst, runtime.graph_for_version(inst.version_id), timezone.now())
        unit.set_instance(context={**inst.context, "note": "zebra-crossing-42"})
        unit.event("instance_restored", by="test")
        runtime.apply(unit)
    assert WorkflowInstance.objects.get(pk=changed.pk).context["note"] == "zebra-crossing-42"
    client = client_for(*VIEWER)
    assert ids(client, "zebra-crossing") == [changed.pk]
    assert untouched.pk not in ids(client, "zebra-crossing")
