"""The editor's canvas at a readable size (issue 22 item 7), in a real browser: node text measures at
least 11 px on screen when a graph opens; Layout arranges the graph in layers and shows it across the
canvas, readable; nodes added by clicking the palette land in free space, not on nodes or edges.

The layout and placement math is lib/arrange.js (tests/js/arrange.test.mjs); these check what the
designer sees: sizes and boxes as drawn on the canvas."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_editor import open_editor

pytestmark = [pytest.mark.e2e]

READABLE_PX = 11

LLM = {"provider": "scripted", "prompt": "Classify {{ input }}", "script": [{"text": "lookup"}]}
ROUTER = {"rules": [{"when": "output.text == 'lookup'", "route": "lookup"}], "default": "answer"}
# A support-ticket triage flow of six nodes, laid out as a designer's first hour leaves it: far apart.
TRIAGE: dict[str, Any] = {
    "nodes": [
        {"id": "start", "type": "start", "position": {"x": 0, "y": 0}},
        {"id": "classify", "type": "llm", "config": LLM, "position": {"x": 420, "y": 0}},
        {"id": "route", "type": "router", "config": ROUTER, "position": {"x": 840, "y": 0}},
        {"id": "lookup", "type": "python", "config": {"function": "noop"}, "position": {"x": 1260, "y": -120}},
        {"id": "answer", "type": "python", "config": {"function": "noop"}, "position": {"x": 1260, "y": 120}},
        {"id": "end", "type": "end", "position": {"x": 1680, "y": 0}},
    ],
    "edges": [
        {"source": "start", "target": "classify"},
        {"source": "classify", "target": "route"},
        {"source": "route", "target": "lookup", "when": "route == 'lookup'"},
        {"source": "route", "target": "answer", "when": "route == 'answer'"},
        {"source": "lookup", "target": "end"},
        {"source": "answer", "target": "end"},
    ],
}
UNPLACED = {"nodes": [{k: v for k, v in n.items() if k != "position"} for n in TRIAGE["nodes"]],
            "edges": TRIAGE["edges"]}
START_END = {"nodes": [{"id": "start", "type": "start", "position": {"x": 0, "y": 0}},
                       {"id": "end", "type": "end", "position": {"x": 400, "y": 0}}],
             "edges": [{"source": "start", "target": "end"}]}

# What is drawn, in the canvas's pixels: each node's box, label size on screen, the canvas's size.
DRAWN = """() => {
  const cy = SteadyflowEditor.cy();
  const nodes = cy.nodes('[type]').map((n) => {
    const b = n.renderedBoundingBox({ includeLabels: false, includeOverlays: false, includeUnderlays: false });
    return { id: n.id(), x1: b.x1, y1: b.y1, x2: b.x2, y2: b.y2,
             text: parseFloat(n.style('font-size')) * cy.zoom(), x: n.position('x'), y: n.position('y') };
  });
  const edges = cy.edges('[display]').map((e) => ({ source: e.data('source'), target: e.data('target'),
    mid: e.renderedMidpoint(), p: e.source().renderedPosition(), q: e.target().renderedPosition() }));
  return { nodes, edges, width: cy.width(), height: cy.height(), zoom: cy.zoom() };
}"""


def drawn(page: Any) -> dict[str, Any]:
    return page.evaluate(DRAWN)


def save(slug: str, graph: dict[str, Any], user: Any) -> None:
    from workflows.authoring.definitions import save_version

    save_version(slug, graph, message="first", user=user)


def assert_readable(view: dict[str, Any]) -> None:
    small = {n["id"]: round(n["text"], 2) for n in view["nodes"] if n["text"] < READABLE_PX}
    assert not small, f"node text under {READABLE_PX} px on screen at zoom {view['zoom']:.2f}: {small}"


def box_of(nodes: list[dict[str, Any]]) -> dict[str, float]:
    return {"x1": min(n["x1"] for n in nodes), "y1": min(n["y1"] for n in nodes),
            "x2": max(n["x2"] for n in nodes), "y2": max(n["y2"] for n in nodes)}


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["x1"] < b["x2"] and b["x1"] < a["x2"] and a["y1"] < b["y2"] and b["y1"] < a["y2"]


def crosses(p: dict[str, float], q: dict[str, float], box: dict[str, float]) -> bool:
    """Whether the straight segment p -> q passes through the box (sampled finely: boxes are >= 40 px)."""
    steps = 200
    return any(box["x1"] < p["x"] + (q["x"] - p["x"]) * i / steps < box["x2"]
               and box["y1"] < p["y"] + (q["y"] - p["y"]) * i / steps < box["y2"] for i in range(steps + 1))


@pytest.mark.parametrize("graph", [TRIAGE, UNPLACED], ids=["saved-positions", "no-positions"])
def test_node_text_is_readable_when_a_graph_opens(page: Any, make_user: Any, login: Any,
                                                  graph: dict[str, Any]) -> None:
    designer = make_user("dana", "designers")
    save("triage", graph, designer)
    login(page, designer)
    open_editor(page, "/workflows/triage/edit/")
    view = drawn(page)
    assert_readable(view)
    # The flow's start is on screen (a graph too wide to read whole is shown from its start).
    start = next(n for n in view["nodes"] if n["id"] == "start")
    assert 0 <= start["x1"] and start["x2"] <= view["width"] and 0 <= start["y1"] and start["y2"] <= view["height"]
    # The Workflow panel's node list reads as separate names ("start classify ...", not "startclassify...").
    boxes = [page.locator(f"#node-buttons button[data-node={n['id']}]").bounding_box() for n in view["nodes"]]
    for a, b in zip(boxes, boxes[1:], strict=False):
        assert b["x"] >= a["x"] + a["width"] + 4 or b["y"] >= a["y"] + a["height"], (a, b)
    assert page.js_errors == []


@pytest.mark.parametrize("button", ["#btn-layout-lr", "#btn-layout-tb"])
def test_layout_arranges_the_graph_in_layers_across_the_canvas(page: Any, make_user: Any, login: Any,
                                                                button: str) -> None:
    designer = make_user("dana", "designers")
    save("triage", TRIAGE, designer)
    login(page, designer)
    open_editor(page, "/workflows/triage/edit/")
    page.click(button)
    view = drawn(page)
    nodes = view["nodes"]
    assert_readable(view)
    # Every node inside the visible canvas ...
    for n in nodes:
        assert n["x1"] >= 0 and n["y1"] >= 0 and n["x2"] <= view["width"] and n["y2"] <= view["height"], n
    # ... the graph spread over a good part of it (not shrunk), centred (not in a corner) ...
    whole = box_of(nodes)
    share = max((whole["x2"] - whole["x1"]) / view["width"], (whole["y2"] - whole["y1"]) / view["height"])
    assert share >= 0.5, f"the laid-out graph spans only {share:.0%} of the canvas"
    centre = ((whole["x1"] + whole["x2"]) / 2 / view["width"], (whole["y1"] + whole["y2"]) / 2 / view["height"])
    assert 0.35 <= centre[0] <= 0.65 and 0.35 <= centre[1] <= 0.65, f"the graph's centre is at {centre}"
    # ... in layers by its edges: each edge goes right (LR) or down (TB), and no two nodes overlap.
    at = {n["id"]: n for n in nodes}
    axis = "x" if button.endswith("lr") else "y"
    for e in view["edges"]:
        assert at[e["target"]][axis] > at[e["source"]][axis], e
    assert not [(a["id"], b["id"]) for i, a in enumerate(nodes) for b in nodes[i + 1:] if overlap(a, b)]
    assert page.evaluate("() => SteadyflowEditor.isDirty()")  # a layout is an edit (saved, undoable)
    assert page.js_errors == []


def test_nodes_added_by_click_land_in_free_space(page: Any, make_user: Any, login: Any) -> None:
    designer = make_user("dana", "designers")
    save("blank", START_END, designer)
    login(page, designer)
    open_editor(page, "/workflows/blank/edit/")
    for node_type in ("python", "llm", "http"):
        page.click(f".palette-item[data-type={node_type}]")
        page.wait_for_selector(f".node-panel[data-node='{node_type}_1']")
    view = drawn(page)
    nodes = view["nodes"]
    assert len(nodes) == 5
    assert_readable(view)
    overlapping = [(a["id"], b["id"]) for i, a in enumerate(nodes) for b in nodes[i + 1:] if overlap(a, b)]
    assert overlapping == []
    added = [n for n in nodes if n["id"] not in ("start", "end")]
    (edge,) = view["edges"]
    for n in added:
        # In view, clear of the start -> end edge and its midpoint.
        assert n["x1"] >= 0 and n["y1"] >= 0 and n["x2"] <= view["width"] and n["y2"] <= view["height"], n
        assert not crosses(edge["p"], edge["q"], n), f"{n['id']} sits on the edge start -> end"
    assert page.js_errors == []
