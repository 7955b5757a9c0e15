"""The editor's "Plan with AI" in a real browser: objective -> the proposal previewed on the canvas as a
diff against the current graph -> a refused proposal names its node -> Discard restores -> Accept keeps
it unsaved -> Save makes version 2. The scripted provider (the dialog's "Scripted reply") stands in for
the model, so nothing leaves the machine."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.test_editor import graph, is_dirty, open_editor

pytestmark = [pytest.mark.e2e]

V1 = {"nodes": [{"id": "start", "type": "start", "position": {"x": 0, "y": 0}},
                {"id": "end", "type": "end", "position": {"x": 300, "y": 0}}],
      "edges": [{"source": "start", "target": "end"}]}
PLAN = {"nodes": [{"id": "start", "type": "start"},
                  {"id": "tidy", "type": "python", "config": {"function": "noop"}},
                  {"id": "end", "type": "end"}],
        "edges": [{"source": "start", "target": "tidy"}, {"source": "tidy", "target": "end"}]}


def propose(page: Any, reply: dict[str, Any]) -> None:
    page.click("#btn-plan")
    page.wait_for_selector("#plan-dialog[open]")
    page.fill("#plan-objective", "Tidy the input before finishing")
    if page.locator("#plan-dialog details").get_attribute("open") is None:  # stays open once opened
        page.click("#plan-dialog summary")
    page.fill("#plan-script", json.dumps(reply))
    page.click("#plan-confirm")


def test_plan_preview_accept_and_save(page: Any, make_user: Any, login: Any) -> None:
    from workflows.authoring.definitions import save_version
    from workflows.models import WorkflowDefinition

    designer = make_user("dana", "designers")
    save_version("tidy", V1, message="plain", user=designer)
    login(page, designer)
    open_editor(page, "/workflows/tidy/edit/")

    # A cyclic proposal is refused in the dialog, naming its node; the canvas is untouched.
    cyclic = json.loads(json.dumps(PLAN))
    cyclic["edges"].append({"source": "tidy", "target": "tidy"})
    propose(page, cyclic)
    page.wait_for_selector("#plan-problems:not([hidden]) li[data-node=tidy]")
    assert "refused" in page.locator("#plan-error").text_content()
    assert "cycle" in page.locator("#plan-problems").text_content()
    page.click("#plan-cancel")
    assert [n["id"] for n in graph(page)["nodes"]] == ["start", "end"] and not is_dirty(page)

    # A valid one is previewed as a diff; Discard puts the canvas back.
    propose(page, PLAN)
    page.wait_for_selector("#plan-preview:not([hidden])")
    rows = page.locator("#plan-diff li").all_text_contents()
    assert any("added node" in r and "tidy" in r for r in rows), rows
    assert any("removed edge" in r and "start → end" in r for r in rows), rows
    assert "3 nodes, 2 edges" in page.locator("#plan-summary").text_content()
    assert page.evaluate("() => SteadyflowEditor.cy().getElementById('tidy').hasClass('diff-added')")
    page.click("#plan-discard")
    page.wait_for_selector("#plan-preview", state="hidden")
    assert graph(page)["nodes"] == V1["nodes"] and graph(page)["edges"] == V1["edges"]
    assert not is_dirty(page)

    # Accept: the proposal becomes unsaved changes (no version yet), then Save makes v2.
    propose(page, PLAN)
    page.wait_for_selector("#plan-preview:not([hidden])")
    page.click("#plan-accept")
    page.wait_for_selector("#plan-preview", state="hidden")
    assert is_dirty(page)
    assert not page.evaluate("() => SteadyflowEditor.cy().getElementById('tidy').hasClass('diff-added')")
    assert WorkflowDefinition.objects.get(slug="tidy").latest_version().number == 1
    page.click("#btn-save")
    page.wait_for_selector("#save-dialog[open]")
    page.fill("#save-message", "Planned: tidy first")
    page.keyboard.press("Enter")
    page.wait_for_selector("#version-badge:text('v2')")
    saved = WorkflowDefinition.objects.get(slug="tidy").latest_version()
    assert saved.number == 2 and saved.message == "Planned: tidy first" and saved.created_by == designer
    assert [(e["source"], e["target"]) for e in saved.graph["edges"]] == [("start", "tidy"), ("tidy", "end")]
    assert {n["id"]: n.get("config") for n in saved.graph["nodes"]}["tidy"] == {"function": "noop"}
    assert page.js_errors == []


def test_the_inspector_links_a_planner_step_to_its_plan_and_child(
        page: Any, login: Any, make_user: Any, redis_conn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import chain
    from workflows import runtime
    from workflows.authoring.definitions import save_version
    from workflows.models import StepRun, WorkflowInstance
    from workflows.workers import dispatch

    # The planner step run by hand in this process (dispatch captured): it plans, records the plan and
    # starts the child, which waits for its person.
    monkeypatch.setattr(dispatch, "enqueue_steps", lambda items, **options: len(items))
    plan = chain({"id": "ask", "type": "human", "config": {"prompt": "ok?"}})
    version = save_version("mom", chain({"id": "plan", "type": "planner", "config": {
        "objective": "ask someone", "provider": "scripted", "script": [{"text": json.dumps(plan)}]}}))
    parent = runtime.start_instance(version, {})
    claim = runtime.claim_step(StepRun.objects.get(instance=parent, node_id="plan").pk, "w1")
    assert claim is not None
    runtime.finish_step(claim, runtime.Outcome(result=claim.kind.run(runtime.build_call(claim))))
    parent.refresh_from_db()
    child = WorkflowInstance.objects.get(parent_step__instance=parent)
    login(page, make_user("olga", "operators"))

    page.goto(f"/instances/{parent.pk}/")
    page.wait_for_function(f"() => window.steadyflowLive && steadyflowLive.store.lastSeq >= {parent.event_seq}")
    pos = page.evaluate("() => steadyflowLive.cy.getElementById('plan').renderedPosition()")
    box = page.locator("#cy").bounding_box()
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
    page.locator("#insp-runs a.child-instance").wait_for()
    text = page.locator("#insp-runs p.child-link").inner_text()
    assert text.startswith("Planned sub-workflow: instance") and "(mom--plan-plan v1, waiting)" in text
    assert page.locator("#insp-runs a.child-instance").get_attribute("href") == f"/instances/{child.pk}/"
    plan_link = page.locator("#insp-runs a.child-plan")
    assert plan_link.get_attribute("href") == "/workflows/mom--plan-plan/edit/?version=1"
    plan_link.click()
    page.wait_for_selector("#editor[data-ready=true]")
    assert [n["id"] for n in page.evaluate("() => SteadyflowEditor.graph()")["nodes"]] == ["start", "ask", "end"]
    assert page.js_errors == []
