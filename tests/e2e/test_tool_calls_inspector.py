"""The step inspector shows an llm step's agent tool calls (static/js/live/toolcalls.js): the
research-agent example run by real workers, its page opened in a real browser."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from tests.conftest import wait_for_status
from workflows import runtime
from workflows.models import WorkflowDefinition

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_inspector_lists_each_tool_call_with_its_arguments_and_result(
        daphne_page: Any, login: Any, user_in: Any, processes: Any) -> None:
    page = daphne_page
    login(page, user_in("operators", "olga"))
    call_command("load_examples", stdout=open("/dev/null", "w"))
    version = WorkflowDefinition.objects.get(slug="research-agent").latest_version()
    instance = runtime.start_instance(version, {"topic": "durable execution"})
    processes.worker("default")
    processes.worker("default")
    processes.worker("ai")
    wait_for_status(instance, "completed", timeout=60)

    page.goto(f"/instances/{instance.pk}/")
    page.wait_for_function("() => window.steadyflowLive && steadyflowLive.store.lastSeq >= "
                           f"{instance.event_seq}")
    pos = page.evaluate("() => steadyflowLive.cy.getElementById('agent').renderedPosition()")
    box = page.locator("#cy").bounding_box()
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
    # The newest run (a tool step's) is open; the llm step's own run opens with a click.
    run = page.locator("#insp-runs details.run").filter(has=page.locator("div.tool-calls")).first
    run.wait_for(state="attached")
    run.locator("summary").click()
    calls = run.locator("div.tool-calls")
    calls.wait_for()
    rows = calls.locator("div.tool-call")
    assert rows.count() == 2
    search = page.locator("#insp-runs div.tool-call[data-call='call_search']").first.inner_text()
    assert "search" in search and '"limit": 2' in search and "Durable Execution: result 1" in search
    lookup = page.locator("#insp-runs div.tool-call[data-call='call_lookup']").first.inner_text()
    assert "a durable way to run long workflows" in lookup
    # The tool steps' own runs are listed under the llm node.
    runs = page.locator("#insp-runs details.run summary").all_inner_texts()
    assert any("(tool call search)" in text for text in runs) and any("(tool call lookup)" in text for text in runs)
    assert page.js_errors == []
