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

    # Each panel offers only what applies: no retries on a timer, the circuit fallback on llm nodes only.
    def panel_of(node_id: str) -> None:
        page.locator("#cy").focus()
        page.keyboard.press("Escape")  # nothing selected: the Workflow panel lists the nodes
        page.click(f"#node-buttons button[data-node={node_id}]")
        page.wait_for_selector(f".node-panel[data-node='{node_id}']")

    def shown(selector: str) -> bool:
        return page.locator(selector).count() > 0

    panel_of("wait_1")
    assert not shown("#f-retry-max_attempts") and not shown("#f-fallback-mode") and shown("#f-compensate")
    panel_of("http_1")
    assert not shown("#f-fallback-mode") and shown("#f-retry-max_attempts") and shown("#f-config-save_as")
    panel_of("llm_1")
    assert shown("#f-fallback-mode") and shown("#f-retry-max_attempts")
    script_help = page.locator(".field[data-path='config.script'] .help").inner_text()
    assert "one object per call" in script_help and "text, route" in script_help
    assert "e.g. [{" in page.get_attribute("#f-config-script", "placeholder")
    assert page.js_errors == []


START = {"id": "start", "type": "start", "position": {"x": 0, "y": 0}}
END = {"id": "end", "type": "end", "position": {"x": 400, "y": 0}}
PLAIN = {"nodes": [START, END], "edges": [{"source": "start", "target": "end"}]}
PAUSING = {"nodes": [START, {"id": "pause", "type": "wait", "config": {"seconds": 5}, "position": {"x": 200, "y": 0}},
                     END],
           "edges": [{"source": "start", "target": "pause"}, {"source": "pause", "target": "end"}]}


def test_restoring_a_version_loads_it_says_so_and_a_second_click_makes_no_duplicate(page: Any, make_user: Any,
                                                                                      login: Any) -> None:
    from workflows.authoring.definitions import save_version
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


def test_the_workflow_panel_declares_the_input_and_shows_an_imported_one(page: Any, make_user: Any,
                                                                        login: Any, doc_shot: Any) -> None:
    import json

    from workflows.authoring.definitions import save_version
    from workflows.models import WorkflowDefinition

    save_version("triage", PLAIN, name="Triage", message="first")
    login(page, make_user("dana", "designers"))
    open_editor(page, "/workflows/triage/edit/")
    assert page.locator("#input-none").is_visible()  # nothing declared yet, and the panel says so

    page.fill("#input-new-name", "ticket")
    page.select_option("#input-new-type", "string")
    page.click("#input-add")
    page.fill("#input-new-name", "priority")
    page.select_option("#input-new-type", "integer")
    page.uncheck("#input-new-required")
    page.press("#input-new-name", "Enter")
    rows = page.locator("#input-fields li").all_inner_texts()
    assert "ticket" in rows[0] and "required" in rows[0] and "priority" in rows[1] and "required" not in rows[1]
    doc_shot(page, "editor-input.png")
    page.fill("#input-new-name", "ticket")
    page.click("#input-add")
    assert "already" in page.text_content("#input-new-error")

    page.click("#btn-save")
    page.fill("#save-message", "declare the input")
    page.click("#save-confirm")
    page.wait_for_selector("#toast:has-text('Saved v2')")
    saved = WorkflowDefinition.objects.get(slug="triage").latest_version().graph["input"]
    assert saved == {"type": "object", "properties": {"ticket": {"type": "string"}, "priority": {"type": "integer"}},
                     "required": ["ticket"]}
    page.click("#btn-run")
    page.wait_for_selector("#run-fields [data-field=ticket]")
    page.click("#run-cancel")

    # An imported file's input shows in the panel too.
    document = dict(PLAIN, input={"type": "object", "required": ["order"],
                                  "properties": {"order": {"type": "string", "description": "the order number"}}})
    page.click("#btn-import")
    page.fill("#import-text", json.dumps(document))
    page.click("#import-confirm")
    page.wait_for_selector("#input-fields li[data-field=order]")
    assert "the order number" in page.text_content("#input-fields")
    assert graph(page)["input"] == document["input"]
    page.locator("li[data-field=order] button").click()
    assert page.locator("#input-none").is_visible() and "input" not in graph(page)
    assert page.js_errors == []


def test_accepting_a_plan_keeps_the_declared_input_and_diffs_show_input_and_config_fields(
        page: Any, make_user: Any, login: Any) -> None:
    from tests.e2e.test_planner import propose
    from workflows.authoring.definitions import save_version
    from workflows.models import WorkflowDefinition

    declared = {"type": "object", "required": ["ticket"], "properties": {"ticket": {"type": "string"}}}
    designer = make_user("dana", "designers")
    save_version("tidy", {**PLAIN, "input": declared}, message="plain", user=designer)
    login(page, designer)
    open_editor(page, "/workflows/tidy/edit/")
    plan = {"nodes": [{"id": "start", "type": "start"}, {"id": "tidy", "type": "wait", "config": {"seconds": 1}},
                      {"id": "end", "type": "end"}],
            "edges": [{"source": "start", "target": "tidy"}, {"source": "tidy", "target": "end"}]}
    propose(page, plan)
    page.wait_for_selector("#plan-preview:not([hidden])")
    assert "declared start input is kept" in page.text_content("#plan-summary")
    assert not any("input" in r for r in page.locator("#plan-diff li").all_text_contents())
    page.click("#plan-accept")
    assert graph(page)["input"] == declared
    page.wait_for_selector("#input-fields li[data-field=ticket]")

    # Change the timer's seconds and the input, save, and compare the versions.
    page.fill("#input-new-name", "tier")
    page.click("#input-add")
    page.click("#btn-save")
    page.fill("#save-message", "planned")
    page.click("#save-confirm")
    page.wait_for_selector("#toast:has-text('Saved v2')")
    assert WorkflowDefinition.objects.get(slug="tidy").latest_version().graph["input"]["required"] == ["ticket", "tier"]
    changed = dict(PAUSING, input=declared)
    changed["nodes"] = [dict(n, config={"seconds": 9}) if n["id"] == "pause" else n for n in PAUSING["nodes"]]
    save_version("tidy", PAUSING, message="pause 5", user=designer)
    save_version("tidy", changed, message="pause 9", user=designer)
    page.click("#btn-versions")
    page.select_option("#diff-from", "2")
    page.select_option("#diff-to", "3")
    page.click("#diff-run")
    page.wait_for_selector("#diff-result .diff-list")
    rows = page.locator("#diff-result li").all_text_contents()
    assert any("removed input" in r for r in rows), rows
    page.select_option("#diff-from", "3")
    page.select_option("#diff-to", "4")
    page.click("#diff-run")
    page.wait_for_selector("#diff-result:has-text('v3 → v4')")
    rows = page.locator("#diff-result li").all_text_contents()
    assert any("pause: config.seconds: 5 ⇒ 9" in r for r in rows), rows
    assert any("added input field" in r and "ticket (string, required)" in r for r in rows), rows
    assert page.js_errors == []


def test_validate_names_an_llm_node_that_cannot_run_and_the_edge_check_a_route_no_router_gives(
        page: Any, make_user: Any, login: Any, doc_shot: Any) -> None:
    from tests.e2e.test_editor import click_node, edge_midpoint
    from workflows.authoring.definitions import save_version

    triage = {"nodes": [START,
                        {"id": "classify", "type": "llm", "config": {"prompt": "Classify {{ input }}"},
                         "position": {"x": 150, "y": 0}},
                        {"id": "pick", "type": "router", "position": {"x": 300, "y": 0},
                         "config": {"rules": [{"when": "true", "route": "answer"}], "default": "lookup"}},
                        dict(END, position={"x": 500, "y": 0})],
              "edges": [{"source": "start", "target": "classify"}, {"source": "classify", "target": "pick"},
                        {"source": "pick", "target": "end", "when": "route == 'answer'"}]}
    save_version("triage", triage, name="Triage", message="first")
    login(page, make_user("dana", "designers"))
    open_editor(page, "/workflows/triage/edit/")

    page.click("#btn-validate")
    page.wait_for_selector("#problems:not([hidden]) #problems-list li")
    problems = page.locator("#problems-list li").all_text_contents()
    assert any("'classify' cannot run here" in p and "needs a script" in p for p in problems), problems
    click_node(page, "classify")
    assert "cannot run here" in page.text_content("#panel-issues")
    page.mouse.move(5, 5)  # no hover handle in the picture
    doc_shot(page, "editor-validate.png")

    page.mouse.click(*edge_midpoint(page, "pick", "end"))
    page.wait_for_selector("#f-when")
    page.wait_for_selector("#when-status.good")
    page.fill("#f-when", "route == 'answr'")
    page.wait_for_selector("#when-status.bad")
    assert "routes only to answer, lookup" in page.text_content("#when-status")
    page.fill("#f-when", "route == 'lookup'")
    page.wait_for_selector("#when-status.good")
    assert page.js_errors == []


def test_the_workflow_list_runs_a_workflow_in_two_clicks(page: Any, make_user: Any, login: Any) -> None:
    from workflows.authoring.definitions import save_version
    from workflows.models import WorkflowInstance

    declared = {"type": "object", "properties": {"ticket": {"type": "string", "default": "T-1"}}}
    save_version("triage", {**PLAIN, "input": declared}, name="Triage", message="first")
    save_version("draft", PLAIN, name="Draft", message="first")
    login(page, make_user("olga", "operators"))
    page.goto("/workflows/")
    assert page.locator("tr[data-slug=triage] .run-link").is_visible()
    page.click("tr[data-slug=triage] .run-link")
    page.wait_for_selector("#run-dialog[open] #run-fields [data-field=ticket]")
    assert page.input_value("#run-fields [data-field=ticket]") == "T-1"
    assert "run=1" not in page.url
    page.click("#run-confirm")
    page.wait_for_url("**/instances/*/")
    assert WorkflowInstance.objects.get().input == {"ticket": "T-1"}
    # A viewer gets no Run button.
    page.context.clear_cookies()
    login(page, make_user("vera", "viewers"))
    page.goto("/workflows/")
    assert page.locator(".run-link").count() == 0
    assert page.js_errors == []


def test_the_keyboard_selects_nodes_connects_them_and_opens_the_step_inspector(page: Any, make_user: Any,
                                                                              login: Any) -> None:
    from workflows import runtime
    from workflows.authoring.definitions import save_version

    version = save_version("pausing", PAUSING, name="Pausing", message="first")
    login(page, make_user("dana", "designers"))
    open_editor(page, "/workflows/pausing/edit/")
    page.locator("#cy").focus()
    page.keyboard.press("n")
    page.wait_for_selector(".node-panel[data-node='start']")
    page.keyboard.press("n")
    page.wait_for_selector(".node-panel[data-node='pause']")
    page.keyboard.press("Shift+N")
    page.wait_for_selector(".node-panel[data-node='start']")
    page.keyboard.press("Shift+N")
    page.wait_for_selector(".node-panel[data-node='end']")
    assert "Selected node end" in page.text_content("#cy-status")
    # Enter moves into the panel; the panel's Connect row draws an edge without a mouse.
    page.locator("#cy").focus()
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.closest('#panel') !== null")
    page.select_option("#connect-target", "pause")
    page.locator("#connect-add").focus()
    page.keyboard.press("Enter")
    assert ("end", "pause") in [(e["source"], e["target"]) for e in graph(page)["edges"]]
    # The Workflow panel lists every node as a button.
    page.keyboard.press("Escape")
    page.locator("#node-buttons button[data-node=pause]").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector(".node-panel[data-node='pause']")
    assert page.evaluate("() => document.activeElement.id") == "f-id"

    # The instance page's graph: focus it, walk the nodes with the arrows, the inspector follows.
    instance = runtime.start_instance(version, {})
    page.goto(f"/instances/{instance.pk}/")
    page.wait_for_selector("#cy[role=application]")
    page.locator("#cy").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#insp-title:has-text('start')")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#insp-title:has-text('pause')")
    page.keyboard.press("Escape")
    page.wait_for_selector("#insp-title:text-is('Step inspector')")
    assert [e for e in page.js_errors if "WebSocket" not in e] == []


def test_plan_with_ai_without_a_provider_offers_the_scripted_planner(page: Any, make_user: Any, login: Any,
                                                                     doc_shot: Any) -> None:
    from workflows.authoring.definitions import save_version

    save_version("tidy", PLAIN, name="Tidy", message="plain")
    login(page, make_user("dana", "designers"))
    open_editor(page, "/workflows/tidy/edit/")
    page.click("#btn-plan")
    page.wait_for_selector("#plan-dialog[open] #plan-no-provider:not([hidden])")
    assert "No LLM provider is configured" in page.text_content("#plan-no-provider")
    page.fill("#plan-objective", "Draft a reply to {{ input.ticket }}")
    page.click("#plan-sample")
    page.click("#plan-confirm")
    page.wait_for_selector("#plan-preview:not([hidden])")
    assert any("added node" in r and "draft" in r for r in page.locator("#plan-diff li").all_text_contents())
    doc_shot(page, "plan-with-ai.png")
    page.click("#plan-accept")
    assert graph(page)["nodes_by_id"]["draft"]["config"]["prompt"] == "Draft a reply to {{ input.ticket }}"
    assert page.js_errors == []
