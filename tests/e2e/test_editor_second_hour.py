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
