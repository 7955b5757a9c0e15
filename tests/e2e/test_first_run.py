"""A newcomer's first hour: the empty dashboard offers the examples, one click runs one with its
declared defaults and opens its live page; the instance list then finds it by an input value, and
picks up new instances by itself. `make screenshots` takes docs/screenshots/first-run.png for the README."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.e2e]

def listed(page: Any) -> list[int]:
    return [int(t) for t in page.locator("#instances tbody td:first-child a").all_text_contents()]


def test_the_first_run_dashboard_leads_to_running_an_example(page: Any, make_user: Any, login: Any,
                                                             redis_conn: Any, doc_shot: Any) -> None:
    from django.core.management import call_command

    from workflows.models import WorkflowInstance

    call_command("load_examples", stdout=open("/dev/null", "w"))
    login(page, make_user("nina", "designers"))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/")
    page.wait_for_selector("#first-run")
    slugs = page.locator("#first-run .example").evaluate_all("es => es.map(e => e.dataset.slug)")
    from workflows.models import WorkflowDefinition

    # Every example load_examples loaded is offered (whatever their number).
    examples = sorted(WorkflowDefinition.objects.filter(archived=False).values_list("slug", flat=True))
    assert len(examples) >= 4 and sorted(slugs) == examples
    assert "Run your first workflow" in page.text_content("#first-run h2")
    doc_shot(page.locator("#first-run"), "first-run.png")

    page.click("#first-run .example[data-slug='react-agent'] .run-example")
    page.wait_for_url("**/instances/*/")
    instance = WorkflowInstance.objects.get()
    assert page.url.endswith(f"/instances/{instance.pk}/")
    assert instance.version.definition.slug == "react-agent"
    assert instance.input == {"question": "Where is my order 42?"}  # the declared default
    # No longer a newcomer: the examples stay, one click from running again.
    page.goto("/")
    page.wait_for_selector("#counts a.tile")
    assert page.text_content("#first-run h2") == "Examples"
    assert page.locator("#first-run .example[data-slug='react-agent'] .run-example").is_visible()
    assert page.js_errors == []


def test_the_instance_list_finds_an_input_value_and_updates_itself(page: Any, make_user: Any, login: Any,
                                                                   redis_conn: Any) -> None:
    from workflows import runtime
    from workflows.authoring.definitions import save_version

    g = {"nodes": [{"id": "start", "type": "start"}, {"id": "end", "type": "end"}],
         "edges": [{"source": "start", "target": "end"}]}
    version = save_version("refunds", g, message="v1")
    wanted = runtime.start_instance(version, {"request_id": "R-1001", "customer": "ada@example.com"})
    runtime.start_instance(version, {"request_id": "R-2002", "customer": "bob@example.com"})
    login(page, make_user("vera", "viewers"))

    page.goto("/instances/")
    assert "text in its start input or context" in page.text_content("#search-hint")
    page.fill("#search-q", "r-1001")
    page.click(".filters button[type=submit]")
    page.wait_for_url("**/instances/?*q=r-1001*")
    assert listed(page) == [wanted.pk]

    # A new instance that matches appears without reloading (the list refreshes itself).
    page.wait_for_selector("#list-live[data-state='live']")
    later = runtime.start_instance(version, {"request_id": "R-1001-b"})
    page.wait_for_selector(f"#instances tbody a[href='/instances/{later.pk}/']")
    assert listed(page) == [later.pk, wanted.pk]
    assert page.text_content("#instance-count") == "2 instances"
    assert page.js_errors == []
