"""The editor's Test node panel in a real browser (static/js/editor/node-test.js): run a router on a
sample and see which edges fire, pin the sample to the node, run an llm node on a pinned response; no
instance is created."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.test_editor import click_node, graph, open_editor

pytestmark = [pytest.mark.e2e]

GRAPH = {
    "nodes": [
        {"id": "start", "type": "start", "position": {"x": 80, "y": 200}},
        {"id": "pick", "type": "router", "position": {"x": 280, "y": 200},
         "config": {"rules": [{"when": "context.amount > 100", "route": "big"}], "default": "small"}},
        {"id": "ask", "type": "llm", "position": {"x": 480, "y": 120},
         "config": {"provider": "openai", "prompt": "Summarise order {{ context.order }}"}},
        {"id": "end", "type": "end", "position": {"x": 680, "y": 200}},
    ],
    "edges": [
        {"source": "start", "target": "pick"},
        {"source": "pick", "target": "ask", "when": "route == 'big'"},
        {"source": "pick", "target": "end", "when": "route == 'small'"},
        {"source": "ask", "target": "end"},
    ],
}


def test_a_designer_tests_a_router_pins_its_sample_and_tests_an_llm_node(page: Any, make_user: Any,
                                                                          login: Any) -> None:
    from workflows.authoring.definitions import save_version
    from workflows.models import Event, StepRun, WorkflowInstance

    save_version("orders", GRAPH, name="Orders", message="first")
    login(page, make_user("dana", "designers"))
    open_editor(page, "/workflows/orders/edit/")

    click_node(page, "pick")
    page.fill("#node-test-sample", json.dumps({"context": {"amount": 250}}))
    page.click("#node-test-run")
    routing = page.locator("#node-test-routing")
    routing.wait_for()
    assert "✓ → ask" in routing.inner_text() and "✗ → end" in routing.inner_text()
    assert json.loads(page.locator("#node-test-output").inner_text()) == {"route": "big"}

    # A sample that does not parse is said so, without a request.
    page.fill("#node-test-sample", "{not json")
    page.click("#node-test-run")
    assert "the sample is not JSON" in page.locator("#node-test-result [role=alert]").inner_text()

    page.fill("#node-test-sample", json.dumps({"context": {"amount": 5}}))
    page.click("#node-test-pin")
    assert graph(page)["nodes_by_id"]["pick"]["sample"] == {"context": {"amount": 5}}
    click_node(page, "ask")
    click_node(page, "pick")  # the panel reopens with the pinned sample
    assert json.loads(page.locator("#node-test-sample").input_value()) == {"context": {"amount": 5}}
    page.click("#node-test-run")
    page.wait_for_selector("#node-test-routing")
    assert "✓ → end" in page.locator("#node-test-routing").inner_text()

    click_node(page, "ask")
    page.fill("#node-test-sample", json.dumps({"context": {"order": "A-17"}}))
    page.fill("#node-test-response", json.dumps({"text": "Two widgets, paid."}))
    page.click("#node-test-run")
    page.wait_for_selector("#node-test-output")
    assert json.loads(page.locator("#node-test-output").inner_text())["text"] == "Two widgets, paid."
    assert "Summarise order A-17" in page.locator("#node-test-config").inner_text()

    # The provider answers with an error: shown, not a broken panel.
    page.fill("#node-test-response", json.dumps({"error": "overloaded"}))
    page.click("#node-test-run")
    page.wait_for_selector("#node-test-failure")
    assert "scripted provider error: overloaded" in page.locator("#node-test-failure").inner_text()

    assert (WorkflowInstance.objects.count(), StepRun.objects.count(), Event.objects.count()) == (0, 0, 0)
    assert page.js_errors == []
