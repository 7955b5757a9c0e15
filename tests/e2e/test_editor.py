"""The workflow editor in a real browser: build, validate, save, reopen, export/import, run, read-only.

Everything on the canvas is done with the mouse and the keyboard, as a designer would; the page's
read-only `SteadyflowEditor` hook is used only to find where things are drawn and to read the result.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ helpers


def open_editor(page: Any, path: str) -> None:
    page.goto(path)
    page.wait_for_selector("#editor[data-ready=true]")


def cy_origin(page: Any) -> tuple[float, float]:
    box = page.locator("#cy").bounding_box()
    return box["x"], box["y"]


def node_center(page: Any, node_id: str) -> tuple[float, float]:
    pos = page.evaluate("(id) => SteadyflowEditor.cy().getElementById(id).renderedPosition()", node_id)
    assert pos is not None, f"node {node_id} is not on the canvas"
    x0, y0 = cy_origin(page)
    return x0 + pos["x"], y0 + pos["y"]


def edge_midpoint(page: Any, source: str, target: str) -> tuple[float, float]:
    pos = page.evaluate("""([s, t]) => {
        const e = SteadyflowEditor.cy().edges().filter(e => e.data('source') === s && e.data('target') === t);
        return e.length ? e[0].renderedMidpoint() : null; }""", [source, target])
    assert pos is not None, f"no edge {source} -> {target}"
    x0, y0 = cy_origin(page)
    return x0 + pos["x"], y0 + pos["y"]


def drag(page: Any, start: tuple[float, float], end: tuple[float, float]) -> None:
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(start[0] + 8, start[1] + 8, steps=2)
    page.mouse.move(*end, steps=12)
    page.mouse.up()


def drop_from_palette(page: Any, node_type: str, at: tuple[float, float]) -> str:
    """Drag a node type from the palette onto the canvas; returns the new node's id."""
    box = page.locator(f".palette-item[data-type={node_type}]").bounding_box()
    before = set(graph(page)["nodes_by_id"])
    x0, y0 = cy_origin(page)
    drag(page, (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2), (x0 + at[0], y0 + at[1]))
    added = set(graph(page)["nodes_by_id"]) - before
    assert len(added) == 1, f"dropping a {node_type} node added {added}"
    return added.pop()


def connect(page: Any, source: str, target: str) -> None:
    """Draw an edge by dragging the handle that appears when hovering the source node."""
    sx, sy = node_center(page, source)
    page.mouse.move(sx - 10, sy)
    page.mouse.move(sx, sy, steps=3)
    handle = page.locator("#edge-handle")
    handle.wait_for(state="visible")
    assert handle.get_attribute("data-node") == source
    box = handle.bounding_box()
    drag(page, (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2), node_center(page, target))
    edges = [(e["source"], e["target"]) for e in graph(page)["edges"]]
    assert (source, target) in edges, f"dragging {source} -> {target} drew no edge (edges: {edges})"


def click_node(page: Any, node_id: str) -> None:
    page.mouse.click(*node_center(page, node_id))
    page.wait_for_selector(f".node-panel[data-node='{node_id}']")


def graph(page: Any) -> dict[str, Any]:
    g = page.evaluate("() => SteadyflowEditor.graph()")
    g["nodes_by_id"] = {n["id"]: n for n in g["nodes"]}
    return g


def positions(page: Any) -> dict[str, dict[str, int]]:
    return {n["id"]: n["position"] for n in page.evaluate("() => SteadyflowEditor.graph()")["nodes"]}


def rename(page: Any, old: str, new: str) -> None:
    click_node(page, old)
    page.fill("#f-id", new)
    page.keyboard.press("Tab")
    page.wait_for_selector(f".node-panel[data-node='{new}']")


def set_function(page: Any, node_id: str, function: str) -> None:
    click_node(page, node_id)
    page.fill("#f-config-function", function)
    page.keyboard.press("Tab")


def is_dirty(page: Any) -> bool:
    return page.evaluate("() => SteadyflowEditor.isDirty()")


# ------------------------------------------------------------------ tests


def test_build_validate_save_reopen_export_import_run(page: Any, make_user: Any, login: Any,
                                                      tmp_path: Path) -> None:
    from workflows.models import WorkflowDefinition, WorkflowInstance

    designer = make_user("dana", "designers")
    login(page, designer)

    # Create the workflow from the list: the editor opens with a start and an end node.
    page.goto("/workflows/")
    page.fill("#new-name", "Order triage")
    page.click("#create-workflow")
    page.wait_for_url("**/workflows/order-triage/edit/")
    page.wait_for_selector("#editor[data-ready=true]")
    assert sorted(graph(page)["nodes_by_id"]) == ["end", "start"]
    assert page.locator("#btn-save").is_enabled()  # never saved: saving the first version is possible

    # Three python nodes from the palette, dropped between start and end.
    sx, sy = node_center(page, "start")
    ex, ey = node_center(page, "end")
    x0, y0 = cy_origin(page)
    sx, sy, ex = sx - x0, sy - y0, ex - x0
    first = drop_from_palette(page, "python", ((sx + ex) / 2, sy))
    second = drop_from_palette(page, "python", (ex - 60, sy - 150))
    third = drop_from_palette(page, "python", (ex - 60, sy + 150))
    assert [first, second, third] == ["python_1", "python_2", "python_3"]

    # Name them and pick their registered function in the side panel (keyboard).
    for old, new in [(first, "triage"), (second, "quick"), (third, "full")]:
        rename(page, old, new)
        # The config form comes from the type's JSON Schema and is checked as it is typed.
        assert page.text_content("[data-error-for='config.function']") == "required"
        set_function(page, new, "noop")
        assert page.text_content("[data-error-for='config.function']") == ""
    click_node(page, "quick")
    page.fill("#f-retry-max_attempts", "0")
    page.wait_for_selector(".field.invalid [data-error-for='retry.max_attempts']")
    assert ">= 1" in page.text_content("[data-error-for='retry.max_attempts']")
    page.fill("#f-config-args", "{oops")
    assert "not valid JSON" in page.text_content("[data-error-for='config.args']")
    page.fill("#f-config-args", "")
    page.fill("#f-retry-max_attempts", "3")
    page.keyboard.press("Tab")
    assert page.text_content("[data-error-for='retry.max_attempts']") == ""
    assert graph(page)["nodes_by_id"]["quick"]["retry"] == {"max_attempts": 3}
    assert graph(page)["nodes_by_id"]["quick"]["config"] == {"function": "noop"}

    # Edges: four drawn with the mouse, one added from the panel with the keyboard.
    connect(page, "start", "triage")
    connect(page, "triage", "quick")
    connect(page, "triage", "full")
    connect(page, "quick", "end")
    click_node(page, "full")
    page.select_option("#connect-target", "end")
    page.click("#connect-add")
    assert sorted((e["source"], e["target"]) for e in graph(page)["edges"]) == [
        ("full", "end"), ("quick", "end"), ("start", "triage"), ("triage", "full"), ("triage", "quick")]

    # A condition on triage -> quick, checked as it is typed.
    page.mouse.click(*edge_midpoint(page, "triage", "quick"))
    # Wait for *this* edge's panel: the edge just added may still have its own panel open.
    page.wait_for_selector(".edge-panel h2:text-is('triage → quick')")
    page.fill("#f-when", "input.fast ==")
    page.wait_for_selector("#when-status.bad")
    assert "does not parse" in page.text_content("#when-status")
    page.fill("#f-when", "input.fast == True")
    page.wait_for_selector("#when-status.good")
    page.keyboard.press("Tab")

    # The end node joins both branches: its join setting appears once it has two incoming edges.
    click_node(page, "end")
    page.select_option("#f-join", "all")

    # An unconditional cycle full -> triage: the validator names it, on the nodes and in the list.
    connect(page, "full", "triage")
    page.click("#btn-validate")
    page.wait_for_selector("#problems:not([hidden]) #problems-list li")
    problems = page.locator("#problems-list li").all_text_contents()
    assert any("unconditional cycle" in p and "triage" in p and "full" in p for p in problems), problems
    marked = page.evaluate("() => SteadyflowEditor.cy().$('.has-error').map(e => e.isNode() ? e.id() : "
                           "e.data('source') + '->' + e.data('target'))")
    assert {"triage", "full", "full->triage"} <= set(marked), marked
    # Saving is refused while the graph has problems.
    page.click("#btn-save")
    page.wait_for_selector(".toast.error")
    assert not page.locator("#save-dialog").is_visible()

    # Fix it: select the offending edge and press Delete; undo brings it back, redo removes it again.
    page.mouse.click(*edge_midpoint(page, "full", "triage"))
    page.wait_for_selector(".edge-panel h2:text-is('full → triage')")
    page.locator("#cy").focus()
    page.keyboard.press("Delete")
    assert ("full", "triage") not in [(e["source"], e["target"]) for e in graph(page)["edges"]]
    page.keyboard.press("Control+z")
    assert ("full", "triage") in [(e["source"], e["target"]) for e in graph(page)["edges"]]
    page.keyboard.press("Control+y")
    assert ("full", "triage") not in [(e["source"], e["target"]) for e in graph(page)["edges"]]
    page.click("#btn-validate")
    page.wait_for_selector("#problems.ok")
    assert page.evaluate("() => SteadyflowEditor.cy().$('.has-error').length") == 0

    # Automatic layout, then move one node by hand: both must survive a save and a reload.
    page.click("#btn-layout-lr")
    qx, qy = node_center(page, "quick")
    away = 90 if qy >= node_center(page, "full")[1] else -90  # away from its neighbour in the same rank
    drag(page, (qx, qy), (qx + 30, qy + away))
    layout = positions(page)
    assert is_dirty(page)

    # Save (Ctrl+S): the validator passes, a message is asked for, v1 is created.
    page.locator("#cy").focus()
    page.keyboard.press("Control+s")
    page.wait_for_selector("#save-dialog[open]")
    page.fill("#save-message", "First draft: triage with a quick path")
    page.keyboard.press("Enter")
    page.wait_for_selector("#save-dialog:not([open])", state="attached")
    page.wait_for_selector("#version-badge:text('v1')")
    assert not is_dirty(page)
    definition = WorkflowDefinition.objects.get(slug="order-triage")
    version = definition.latest_version()
    assert version.number == 1 and version.created_by == designer
    assert version.message == "First draft: triage with a quick path"
    saved = {n["id"]: n for n in version.graph["nodes"]}
    assert {k: v["position"] for k, v in saved.items()} == layout
    assert saved["end"]["join"] == "all" and saved["triage"]["config"] == {"function": "noop"}
    assert {"source": "triage", "target": "quick", "when": "input.fast == True"} in version.graph["edges"]

    # Reopen: the same layout, nothing unsaved.
    open_editor(page, "/workflows/order-triage/edit/")
    assert positions(page) == layout
    assert not is_dirty(page)
    assert page.locator("#dirty-flag").is_hidden()

    # Export the JSON, spoil the canvas, import the file again: the saved graph is back.
    with page.expect_download() as download_info:
        page.click("#btn-export")
    exported_path = tmp_path / "export.json"
    download_info.value.save_as(exported_path)
    exported = json.loads(exported_path.read_text())
    assert exported["slug"] == "order-triage" and exported["name"] == "Order triage"
    assert exported["nodes"] == version.graph["nodes"] and exported["edges"] == version.graph["edges"]

    click_node(page, "quick")
    page.keyboard.press("Delete")
    assert "quick" not in graph(page)["nodes_by_id"] and is_dirty(page)
    page.click("#btn-import")
    page.set_input_files("#import-file", str(exported_path))
    page.wait_for_function("() => document.querySelector('#import-text').value.length > 0")
    page.click("#import-confirm")
    page.wait_for_selector("#import-dialog:not([open])", state="attached")
    reimported = graph(page)
    assert [{k: v for k, v in n.items()} for n in reimported["nodes"]] == version.graph["nodes"]
    assert reimported["edges"] == version.graph["edges"]
    assert not is_dirty(page)  # identical to the saved version

    # Run: the start input is checked as typed; starting lands on the instance page.
    page.click("#btn-run")
    page.wait_for_selector("#run-dialog[open]")
    page.fill("#run-input", '{"fast": ')
    page.wait_for_selector("#run-error:not([hidden])")
    assert page.locator("#run-confirm").is_disabled()
    page.fill("#run-input", "[1, 2]")
    assert "JSON object" in page.text_content("#run-error")
    page.fill("#run-input", '{"fast": true}')
    assert page.locator("#run-confirm").is_enabled()
    page.click("#run-confirm")
    page.wait_for_url(re.compile(r".*/instances/\d+/$"))
    instance_id = int(re.search(r"/instances/(\d+)/$", page.url).group(1))
    instance = WorkflowInstance.objects.get(pk=instance_id)
    assert instance.version == version and instance.input == {"fast": True}
    assert page.js_errors == []


def test_viewer_gets_a_read_only_editor_and_cannot_save(page: Any, make_user: Any, login: Any) -> None:
    from workflows.authoring.definitions import save_version
    from workflows.models import WorkflowVersion

    save_version("lookup", {"nodes": [{"id": "start", "type": "start"}, {"id": "end", "type": "end"}],
                            "edges": [{"source": "start", "target": "end"}]}, message="v1")
    viewer = make_user("vic", "viewers")
    login(page, viewer)
    open_editor(page, "/workflows/lookup/edit/")
    assert page.locator("#readonly-flag").is_visible()
    assert "designers group" in page.text_content("#banner")
    assert page.locator("#btn-save").is_hidden()
    assert page.locator(".palette-item[data-type=llm]").is_disabled()
    assert page.locator("#btn-run").is_disabled()
    click_node(page, "start")
    assert page.locator("#f-id").is_disabled()
    # Keys that edit do nothing; nodes cannot be dragged.
    before = positions(page)
    page.locator("#cy").focus()
    page.keyboard.press("Delete")
    sx, sy = node_center(page, "start")
    drag(page, (sx, sy), (sx + 80, sy + 80))
    assert positions(page) == before and sorted(graph(page)["nodes_by_id"]) == ["end", "start"]
    # The server refuses too, even to a hand-made request with a valid CSRF token.
    answer = page.evaluate("""async () => {
        const r = await fetch('/api/workflows/lookup/versions', {method: 'POST',
          headers: {'Content-Type': 'application/json',
                    'X-CSRFToken': document.querySelector('input[name=csrfmiddlewaretoken]').value},
          body: JSON.stringify({graph: SteadyflowEditor.graph(), message: 'sneaky', base_version: 1})});
        return {status: r.status, body: await r.json()}; }""")
    assert answer["status"] == 403 and "designers" in answer["body"]["message"]
    assert WorkflowVersion.objects.filter(definition__slug="lookup").count() == 1
    # Validation and export stay available to viewers.
    page.click("#btn-validate")
    page.wait_for_selector("#problems.ok")
    assert page.js_errors == []


def test_versions_compare_open_read_only_and_restore(page: Any, make_user: Any, login: Any) -> None:
    from workflows.authoring.definitions import save_version
    from workflows.models import WorkflowDefinition

    v1 = {"nodes": [{"id": "start", "type": "start", "position": {"x": 0, "y": 0}},
                    {"id": "end", "type": "end", "position": {"x": 300, "y": 0}}],
          "edges": [{"source": "start", "target": "end"}]}
    v2 = {"nodes": [v1["nodes"][0], {"id": "pause", "type": "wait", "config": {"seconds": 5},
                                     "position": {"x": 150, "y": 80}}, v1["nodes"][1]],
          "edges": [{"source": "start", "target": "pause"}, {"source": "pause", "target": "end"}],
          "settings": {"max_transitions": 5}}
    designer = make_user("dana", "designers")
    save_version("pausing", v1, message="plain", user=designer)
    save_version("pausing", v2, message="add a pause", user=designer)
    login(page, designer)
    open_editor(page, "/workflows/pausing/edit/")

    page.click("#btn-versions")
    page.wait_for_selector("#versions-dialog[open]")
    rows = page.locator("#versions-body tr").all_text_contents()
    assert "add a pause" in rows[0] and "dana" in rows[0] and "plain" in rows[1]
    page.select_option("#diff-from", "1")
    page.select_option("#diff-to", "2")
    page.click("#diff-run")
    page.wait_for_selector("#diff-result:not([hidden]) .diff-list")
    diff = page.locator("#diff-result li").all_text_contents()
    assert any("added node" in d and "pause" in d for d in diff), diff
    assert any("removed edge" in d and "start → end" in d for d in diff), diff
    assert any("max_transitions" in d for d in diff), diff
    assert page.evaluate("() => SteadyflowEditor.cy().getElementById('pause').hasClass('diff-added')")

    # Open v1: read-only, with a way back and a restore button.
    page.click("#versions-body tr[data-version='1'] a")
    page.wait_for_url("**/workflows/pausing/edit/?version=1")
    page.wait_for_selector("#editor[data-ready=true]")
    assert page.locator("#readonly-flag").is_visible() and page.locator("#btn-save").is_hidden()
    assert sorted(graph(page)["nodes_by_id"]) == ["end", "start"]
    page.click("#banner-restore")
    page.wait_for_url("**/workflows/pausing/edit/")
    page.wait_for_selector("#editor[data-ready=true]")
    latest = WorkflowDefinition.objects.get(slug="pausing").latest_version()
    assert latest.number == 3 and latest.message == "Restored from v1" and latest.graph == v1
    assert page.text_content("#version-badge") == "v3"
    assert sorted(graph(page)["nodes_by_id"]) == ["end", "start"]

    # Multi-select with Shift+click, move both with the arrow keys, zoom with the buttons.
    before = positions(page)
    page.keyboard.down("Shift")
    page.mouse.click(*node_center(page, "start"))
    page.mouse.click(*node_center(page, "end"))
    page.keyboard.up("Shift")
    page.wait_for_selector("#panel :text('2 nodes and 0 edges selected')")
    page.locator("#cy").focus()
    page.keyboard.press("Shift+ArrowDown")
    after = positions(page)
    assert all(after[n]["y"] == before[n]["y"] + 50 and after[n]["x"] == before[n]["x"] for n in before)
    zoom = page.evaluate("() => SteadyflowEditor.cy().zoom()")
    page.click("#btn-zoom-in")
    assert page.evaluate("() => SteadyflowEditor.cy().zoom()") > zoom

    # Connect mode (C): dragging from a node draws an edge instead of moving the node.
    page.keyboard.press("c")
    assert page.get_attribute("#btn-connect", "aria-pressed") == "true"
    before = positions(page)
    drag(page, node_center(page, "end"), node_center(page, "start"))
    assert ("end", "start") in [(e["source"], e["target"]) for e in graph(page)["edges"]]
    assert positions(page) == before
    page.keyboard.press("Escape")
    assert page.get_attribute("#btn-connect", "aria-pressed") == "false"

    # Leaving with unsaved changes asks first; staying keeps the edit.
    assert is_dirty(page)
    asked: list[str] = []

    def stay(dialog: Any) -> None:
        asked.append(dialog.type)
        dialog.dismiss()

    page.on("dialog", stay)
    page.click(".crumbs a")
    page.wait_for_timeout(300)  # a navigation that was going to happen has started by now
    assert asked == ["beforeunload"] and page.url.endswith("/workflows/pausing/edit/") and is_dirty(page)
    assert page.js_errors == []


def test_readme_screenshot_of_the_research_example(page: Any, make_user: Any, login: Any, doc_shot: Any) -> None:
    from workflows.authoring.definitions import save_document

    document = json.loads((ROOT / "workflows/examples/graphs/research_report.json").read_text())
    save_document(document, message="example")
    slug = document["slug"]
    login(page, make_user("dana", "designers"))
    open_editor(page, f"/workflows/{slug}/edit/")
    click_node(page, "compare")
    page.mouse.move(5, 5)  # no hover handle in the picture
    page.wait_for_selector("#edge-handle", state="hidden")
    doc_shot(page, "editor.png")
    assert page.js_errors == []
