"""The designer's second hour in the editor (issue 22), in a real browser: adding every node type,
restoring a version, declaring the workflow's input, what Plan with AI keeps, Validate and the edge
check catching what cannot run, selecting nodes with the keyboard."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_editor import graph, open_editor

pytestmark = [pytest.mark.e2e]


def test_adding_a_timer_or_a_router_from_the_palette_shows_its_panel(page: Any, make_user: Any,
                                                                     login: Any) -> None:
    login(page, make_user("dana", "designers"))
    page.goto("/workflows/")
    page.fill("#new-name", "Palette")
    page.click("#create-workflow")
    page.wait_for_selector("#editor[data-ready=true]")
    for node_type in ("wait", "router", "llm", "http", "python", "human"):
        page.click(f".palette-item[data-type={node_type}]")
        page.wait_for_selector(f".node-panel[data-node='{node_type}_1']")
    assert {f"{t}_1" for t in ("wait", "router")} <= set(graph(page)["nodes_by_id"])
    assert page.js_errors == []


START = {"id": "start", "type": "start", "position": {"x": 0, "y": 0}}
END = {"id": "end", "type": "end", "position": {"x": 400, "y": 0}}
PLAIN = {"nodes": [START, END], "edges": [{"source": "start", "target": "end"}]}
PAUSING = {"nodes": [START, {"id": "pause", "type": "wait", "config": {"seconds": 5}, "position": {"x": 200, "y": 0}},
                     END],
           "edges": [{"source": "start", "target": "pause"}, {"source": "pause", "target": "end"}]}


def test_restoring_a_version_loads_it_says_so_and_a_second_click_makes_no_duplicate(page: Any, make_user: Any,
                                                                                      login: Any) -> None:
    from workflows.definitions import save_version
    from workflows.models import WorkflowVersion

    designer = make_user("dana", "designers")
    save_version("pausing", PLAIN, message="plain", user=designer)
    save_version("pausing", PAUSING, message="add a pause", user=designer)
    login(page, designer)
    open_editor(page, "/workflows/pausing/edit/")
    assert "pause" in graph(page)["nodes_by_id"]

    page.click("#btn-versions")
    restore = page.locator("#versions-body tr[data-version='1'] button.restore")
    restore.click()
    page.wait_for_function("() => !document.querySelector('#versions-dialog').open")
    assert sorted(graph(page)["nodes_by_id"]) == ["end", "start"]  # the canvas shows the restored graph
    assert page.text_content("#version-badge") == "v3"
    assert "Restored v1 as v3" in page.text_content("#toast")
    assert not page.evaluate("() => SteadyflowEditor.isDirty()")

    # Again: v3 already is v1's graph, so nothing new is saved and the editor says so.
    page.click("#btn-versions")
    page.locator("#versions-body tr[data-version='1'] button.restore").click()
    page.wait_for_selector("#toast:has-text('already holds')")
    assert WorkflowVersion.objects.filter(definition__slug="pausing").count() == 3
    assert page.js_errors == []
