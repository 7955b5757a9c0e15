"""The editor's help in a real browser: a route typo caught at validation, the function picker, the
save conflict shown before "Save anyway", and the toolbar that does not move when a change is made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.test_editor import click_node, edge_midpoint, graph, open_editor

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


def save_example(name: str, user: Any = None) -> dict[str, Any]:
    from workflows.authoring.definitions import save_document
    from workflows.examples import load_example

    document = load_example(ROOT / "workflows" / "examples" / "graphs" / name)
    save_document(document, message="example", user=user)
    return document


def test_a_route_typo_is_caught_at_validation_and_shown_on_its_edge(page: Any, make_user: Any, login: Any) -> None:
    document = save_example("react_agent.json")
    login(page, make_user("dana", "designers"))
    open_editor(page, f"/workflows/{document['slug']}/edit/")
    page.mouse.click(*edge_midpoint(page, "intent", "think"))
    page.wait_for_selector(".edge-panel")
    page.fill("#f-when", "route == 'thnik'")
    page.keyboard.press("Tab")
    page.click("#btn-validate")
    page.wait_for_selector("#problems:not([hidden])")
    problems = page.text_content("#problems-list")
    assert "thnik" in problems, problems
    # The edge is marked on the canvas and its panel lists the problem.
    marked = page.evaluate("""() => SteadyflowEditor.cy().edges('.has-error').map(
        e => [e.data('source'), e.data('target')])""")
    assert marked == [["intent", "think"]]
    assert "thnik" in page.text_content("#panel-issues")
    assert any("thnik" in m for m in page.evaluate("() => SteadyflowEditor.state().issues"))
    assert page.js_errors == []


def test_the_function_picker_fills_a_python_nodes_function(page: Any, make_user: Any, login: Any,
                                                           doc_shot: Any) -> None:
    from workflows.authoring.definitions import save_version
    from workflows.engine.functions import describe_functions

    g = {"nodes": [{"id": "start", "type": "start", "position": {"x": 0, "y": 0}},
                   {"id": "tool", "type": "python", "config": {"function": "noop"}, "position": {"x": 260, "y": 0}},
                   {"id": "end", "type": "end", "position": {"x": 520, "y": 0}}],
         "edges": [{"source": "start", "target": "tool"}, {"source": "tool", "target": "end"}]}
    save_version("tools", g, message="v1")
    docs = {f["name"]: f["doc"] for f in describe_functions()}
    login(page, make_user("dana", "designers"))
    open_editor(page, "/workflows/tools/edit/")
    click_node(page, "tool")
    row = page.locator(".field[data-path='config.function']")
    # The docstrings come from /api/functions, fetched once the panel is open: wait for them.
    expect(row.locator(".fn-doc")).to_have_text(docs["noop"].split("\n")[0])

    row.locator(".fn-picker summary").click()
    row.locator(".fn-choice").first.wait_for()
    listed = row.locator(".fn-choice").evaluate_all("bs => bs.map(b => b.dataset.function)")
    assert set(listed) == set(docs)
    assert docs["examples.lookup_order"].split("\n")[0] in row.text_content()
    row.locator(".fn-search").fill("lookup order")
    assert row.locator(".fn-choice").evaluate_all("bs => bs.map(b => b.dataset.function)") == ["examples.lookup_order"]
    row.locator(".fn-choice[data-function='examples.lookup_order']").click()

    assert page.input_value("#f-config-function") == "examples.lookup_order"
    assert graph(page)["nodes_by_id"]["tool"]["config"]["function"] == "examples.lookup_order"
    assert row.locator(".fn-doc").text_content() == docs["examples.lookup_order"].split("\n")[0]
    assert page.evaluate("() => SteadyflowEditor.isDirty()")
    assert not row.locator(".fn-picker").evaluate("d => d.open")

    # The compensate field has one too: it fills the name as JSON.
    comp = page.locator(".field[data-path='compensate']")
    comp.locator(".fn-picker summary").click()
    comp.locator(".fn-choice[data-function='noop']").click()
    assert json.loads(page.input_value("#f-compensate")) == "noop"
    assert graph(page)["nodes_by_id"]["tool"]["compensate"] == "noop"
    page.mouse.move(5, 5)
    row.locator(".fn-picker summary").click()
    row.locator(".fn-search").fill("")
    row.locator(".fn-choice").nth(2).wait_for()
    doc_shot(page, "function-picker.png")
    assert page.js_errors == []


def test_save_anyway_shows_the_change_it_overwrites(page: Any, make_user: Any, login: Any) -> None:
    from workflows.authoring.definitions import save_version
    from workflows.models import WorkflowDefinition

    g = {"nodes": [{"id": "start", "type": "start", "position": {"x": 0, "y": 0}},
                   {"id": "tool", "type": "python", "config": {"function": "noop"}, "position": {"x": 260, "y": 0}},
                   {"id": "end", "type": "end", "position": {"x": 520, "y": 0}}],
         "edges": [{"source": "start", "target": "tool"}, {"source": "tool", "target": "end"}]}
    save_version("shared", g, message="v1")
    dana = make_user("dana", "designers")
    bob = make_user("bob", "designers")
    login(page, dana)
    open_editor(page, "/workflows/shared/edit/")
    crumbs_before = page.locator(".editor-toolbar").bounding_box()

    # Bob saves v2 meanwhile: a node between tool and end.
    theirs = json.loads(json.dumps(g))
    theirs["nodes"].insert(2, {"id": "notify", "type": "python", "config": {"function": "noop"},
                               "position": {"x": 400, "y": 120}})
    theirs["edges"] = [{"source": "start", "target": "tool"}, {"source": "tool", "target": "notify"},
                       {"source": "notify", "target": "end"}]
    save_version("shared", theirs, message="notify the customer", user=bob)

    # Dana changes the label of `tool` and saves.
    click_node(page, "tool")
    page.fill("#f-label", "Look it up")
    page.keyboard.press("Tab")
    page.wait_for_selector("#dirty-flag:not(.off)")
    # The "unsaved changes" flag took no room of its own: the toolbar kept its size.
    assert page.locator(".editor-toolbar").bounding_box() == crumbs_before
    page.click("#btn-save")
    page.wait_for_selector("#save-dialog[open]")
    page.fill("#save-message", "a clearer label")
    page.click("#save-confirm")
    page.wait_for_selector("#save-conflict:not([hidden])")
    head = page.text_content("#conflict-head")
    assert "v2 was saved by bob at" in head and "(you started from v1)" in head and "notify the customer" in head
    theirs_text = page.text_content("#conflict-theirs")
    assert "added node notify" in theirs_text and "tool → notify" in theirs_text
    yours = page.text_content("#conflict-yours")
    assert "removed node notify" in yours and 'changed node tool: label set to "Look it up"' in yours
    assert page.is_visible("#save-force")
    assert WorkflowDefinition.objects.get(slug="shared").latest_version().number == 2

    page.click("#save-force")
    page.wait_for_selector("#save-dialog", state="hidden")
    latest = WorkflowDefinition.objects.get(slug="shared").latest_version()
    assert latest.number == 3 and latest.message == "a clearer label"
    assert [n["id"] for n in latest.graph["nodes"]] == ["start", "tool", "end"]
    assert page.js_errors == []
