"""Accessibility, page by page (issue 22, item 21): axe-core (vendored for the tests only,
tests/e2e/vendor/, `make vendor`) runs on every page we serve, as an admin sees it with example
workflows, running, completed, halted and waiting instances, review items, an evaluation, triggers,
a credential and a token; any serious or critical violation fails, naming its rule, impact and nodes.

Which pages: every named route of dashboard/urls.py is either visited here (PAGES) or excluded with
a reason (EXCLUDED, or a JSON/admin namespace in EXCLUDED_PREFIXES); a new route fails
test_every_route_is_checked_or_excluded until it is one or the other.

The pages are visited in one browser page, one world: a page's own scripts (charts, graphs, the live
view, the editor) have drawn before axe runs, so what they add is checked too."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
FAILING_IMPACTS = ("serious", "critical")

# Routes that are not pages, with why they are not checked here.
EXCLUDED = {
    "healthz": "plain-text health check for load balancers",
    "metrics": "Prometheus text exposition",
    "webhook-receive": "incoming webhook endpoint (JSON, POST only)",
    "workflow-duplicate": "POST action, redirects to the editor",
    "workflow-archive": "POST action, redirects to the workflow list",
    "credential-delete": "POST action, redirects to the credentials page",
    "api-token-revoke": "POST action, redirects to the tokens page",
    "logout": "POST action, redirects to the login page (checked)",
    "review-next": "redirects to the next open item or the inbox (both checked)",
    "api-docs": "redirects to /api/v1/docs (checked as v1:openapi-view)",
}
EXCLUDED_PREFIXES = {
    "api-": "JSON endpoints of the pages' scripts",
    "demo-": "the examples' demo endpoints (JSON; when STEADYFLOW_DEMO_ENDPOINTS is on)",
    "^static/": "static files (served by the app when DEBUG is on)",
    "v1:": "the v1 REST API (JSON); its docs page is checked",
    "admin:": "Django's own admin pages; the admin pages of ours (templates/admin/) are checked",
}


def route_names() -> set[str]:
    """Every named route, namespaced ("v1:openapi-view"), and the pattern of each unnamed one."""
    names: set[str] = set()

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, f"{prefix}{pattern.namespace}:" if pattern.namespace else prefix)
            elif isinstance(pattern, URLPattern):
                names.add(prefix + (pattern.name or str(pattern.pattern)))

    walk(get_resolver().url_patterns, "")
    return names


# The routes test_every_page_passes_axe visits (the 404 and 403 pages are checked as well).
VISITED = {"home", "workflow-list", "definition", "evaluations", "evaluation", "workflow-editor", "workflow-triggers",
           "instance-list", "instance", "instance-report", "credential-list", "credential-edit", "review-list",
           "review-detail", "review-action", "login", "api-tokens", "v1:openapi-view",
           "admin:workflows_reviewitem_decide", "admin:workflows_reviewitem_changelist"}


def test_every_route_is_checked_or_excluded() -> None:
    routes = route_names()
    unaccounted = sorted(name for name in routes if name not in VISITED and name not in EXCLUDED
                         and not (name.startswith(tuple(EXCLUDED_PREFIXES)) and name not in VISITED))
    assert unaccounted == [], ("routes neither checked for accessibility nor excluded with a reason "
                               f"(tests/e2e/test_accessibility.py): {unaccounted}")
    assert sorted(VISITED - routes) == [] and sorted(set(EXCLUDED) - routes) == []  # no stale names


# --- axe ------------------------------------------------------------------------------------------------

RUN_AXE = """async (context) => {
    const result = await axe.run(context || document, {resultTypes: ['violations']});
    return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
        nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 160),
                                  summary: (n.failureSummary || '').split('\\n').slice(1, 3).join(' ')}))}));
}"""


FIRST_TABBABLE = """() => {
    const all = document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]');
    const first = [...all].find(e => e.tabIndex >= 0 && !e.disabled && e.type !== 'hidden'
                                   && e.getClientRects().length > 0);
    return first ? [first.className, first.getAttribute('href')] : null;
}"""


def axe_violations(page: Any, context: str | None = None) -> list[dict[str, Any]]:
    return page.evaluate(RUN_AXE, context)


def describe(path: str, violations: list[dict[str, Any]]) -> str:
    lines = []
    for v in violations:
        lines.append(f"{path}: {v['id']} ({v['impact']}): {v['help']}")
        lines.extend(f"    {n['target']}  {n['html']}  -- {n['summary']}" for n in v["nodes"][:40])
    return "\n".join(lines)


class Checker:
    """Visits pages in one browser page and keeps every serious or critical violation for one report."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.failures: list[str] = []
        self.others: list[str] = []  # moderate and minor: printed, not failed
        self.checked: list[str] = []

    def visit(self, path: str, ready: str | None = None, *, status: int = 200, skip_link: bool = True,
              context: str | None = None) -> None:
        response = self.page.goto(path)
        assert response is not None and response.status == status, (path, response and response.status)
        self.page.wait_for_load_state("load")
        if ready:
            self.page.wait_for_function(ready) if ready.startswith("()") else self.page.wait_for_selector(ready)
        self.check(path, skip_link=skip_link, context=context)

    def check(self, label: str, *, skip_link: bool = True, context: str | None = None) -> None:
        page = self.page
        # Let the pages' scripts finish drawing (two frames) before axe looks.
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        violations = axe_violations(page, context)
        bad = [v for v in violations if v["impact"] in FAILING_IMPACTS]
        if bad:
            self.failures.append(describe(label, bad))
        self.others.extend(f"{label}: {v['id']} ({v['impact']})" for v in violations if v not in bad)
        if skip_link:
            # The skip link is the first thing Tab reaches (in document order: the login page's autofocus
            # starts Tab from its username field, as it should), and it leads to the main landmark.
            first = page.evaluate(FIRST_TABBABLE)
            if first != ["skip-link", "#main"] or not page.locator("main#main").count():
                self.failures.append(f"{label}: the first element Tab reaches is {first}, not the skip link to main")
        self.checked.append(label)


# --- The world --------------------------------------------------------------------------------------------

def build_world(admin: Any) -> dict[str, Any]:
    """Examples, instances in each state, review items open and decided, an evaluation, triggers, a
    credential and a token: each page then shows its tables, panels and forms filled."""
    import tests.workflows.functions  # noqa: F401 - registers tests.echo
    from tests.conftest import chain, halts_as_it_starts
    from tests.dashboard.test_operations import run_queued, start
    from tests.e2e.test_inbox import QUICK, REFUND, human, loop_halt
    from workflows.authoring.definitions import save_version
    from workflows.evaluations import datasets, runner
    from workflows.models import ReviewItem
    from workflows.operators import review
    from workflows.scheduler import inprocess
    from workflows.triggers import action_links

    completed = run_queued(start(chain({"id": "a", "type": "python", "config": {"function": "live.note"}})))
    assert completed.status == "completed", completed.status
    running = start(chain({"id": "a", "type": "python", "config": {"function": "live.note"}}))
    halted = run_queued(start(halts_as_it_starts()))
    assert halted.status == "halted", halted.status
    loop = loop_halt({"max_transitions": 6})  # loads the examples; LLM steps: tokens, a report with replies
    waiting = human(REFUND, "refund-ask", {"amount": 20, "ticket": "T-1"})
    decided = human(QUICK, "ship-ask", {"ticket": "T-2"})
    decided_item = ReviewItem.objects.get(instance=decided, status="open")
    review.decide(decided_item.pk, admin, review.Decision(action="approve", inputs={"carrier": "post"}))

    greeter = save_version("greeter", chain({"id": "greet", "type": "python", "config": {
        "function": "tests.echo", "args": {"set": {"answer": "Hello {{ input.name }}"}}}}))
    rows = [{"label": "ada", "input": {"name": "Ada"}, "expect": [{"type": "equals", "path": "answer",
                                                                   "value": "Hello Ada"}]},
            {"label": "bob", "input": {"name": "Bob"}, "expect": [{"type": "contains", "path": "answer",
                                                                   "value": "Robert"}]}]
    dataset = datasets.save(greeter.definition, "smoke", "".join(json.dumps(r) + "\n" for r in rows))
    evaluation = runner.start(dataset, greeter, concurrency=1)
    for _ in range(20):
        inprocess.drain()
        if runner.advance(evaluation.pk):
            break

    client = Client()
    client.force_login(admin)
    client.post("/workflows/greeter/triggers/", {"action": "add_webhook", "name": "shop",
                                                 "input_mapping": '{"name": "/customer/name"}'})
    client.post("/workflows/greeter/triggers/", {"action": "add_schedule", "cron": "0 3 * * *",
                                                 "timezone": "UTC", "catch_up": "once", "input": '{"name": "Cy"}'})
    client.post("/credentials/", {"name": "shop_key", "kind": "secret", "value": "s3cret", "description": "the shop"})
    client.post("/account/tokens/", {"name": "deploy bot", "scopes": ["read", "run"]})
    halted_item = ReviewItem.objects.get(instance=halted, status="open")
    return {
        "completed": completed, "running": running, "halted": halted, "loop": loop, "waiting": waiting,
        "decided": decided, "decided_item": decided_item, "halted_item": halted_item,
        "waiting_item": ReviewItem.objects.get(instance=waiting, status="open"),
        "evaluation": evaluation, "slug": greeter.definition.slug, "every_kind": every_kind().definition.slug,
        "approve_link": action_links.path_for(halted_item.pk, "approve"),
    }


def every_kind() -> Any:
    """The node kinds no example has (a wait, a router), for their panels in the editor."""
    from tests.conftest import chain
    from workflows.authoring.definitions import save_version

    return save_version("every-kind", chain(
        {"id": "nap", "type": "wait", "config": {"seconds": 60}},
        {"id": "pick", "type": "router", "config": {"rules": [{"when": "context.more", "route": "end"}],
                                                    "default": "end"}}))


LIVE_READY = "() => window.steadyflowLive && steadyflowLive.store.lastSeq >= {seq}"
EDITOR_READY = "#editor[data-ready=true]"
DIALOGS = {"btn-save": "save-dialog", "btn-run": "run-dialog", "btn-versions": "versions-dialog",
           "btn-import": "import-dialog", "btn-plan": "plan-dialog"}


def check_editors(checker: Checker, slugs: list[str]) -> None:
    """Each editor with its Workflow panel, then the panel of one node of every kind (drawn by the
    editor's scripts when a node is selected), and each toolbar dialog once."""
    from workflows.models import WorkflowDefinition

    page, seen = checker.page, set()
    for slug in slugs:
        checker.visit(f"/workflows/{slug}/edit/", EDITOR_READY)
        for node in WorkflowDefinition.objects.get(slug=slug).latest_version().graph["nodes"]:
            if node["type"] in seen:
                continue
            seen.add(node["type"])
            page.evaluate("(id) => { const cy = SteadyflowEditor.cy(); cy.$(':selected').unselect();"
                          " cy.getElementById(id).select(); }", node["id"])
            page.wait_for_selector(f".node-panel[data-node='{node['id']}']")
            checker.check(f"/workflows/{slug}/edit/ node {node['id']} ({node['type']})", skip_link=False)
    # A change (a node moved by the keyboard) enables Save.
    page.focus("#cy")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#btn-save:not([disabled])")
    for button, dialog in DIALOGS.items():
        page.click(f"#{button}")
        page.wait_for_selector(f"#{dialog}[open]")
        checker.check(f"/workflows/{slugs[-1]}/edit/ #{dialog}", skip_link=False)
        page.keyboard.press("Escape")
        page.wait_for_selector(f"#{dialog}:not([open])", state="attached")
    page.click("#btn-validate")
    page.wait_for_selector("#toast:not([hidden])")
    checker.check(f"/workflows/{slugs[-1]}/edit/ validated", skip_link=False)


def check_keyboard(page: Any, timeline_instance: Any) -> None:
    """The skip link is the first Tab stop, shows when focused and moves the focus to the main content;
    the instance's timeline scrolls from the keyboard."""
    page.goto("/")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.className") == "skip-link"
    box = page.locator(".skip-link").bounding_box()
    assert box is not None and box["y"] >= 0, f"the focused skip link is off screen: {box}"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"

    page.goto(f"/instances/{timeline_instance.pk}/")
    page.wait_for_function(LIVE_READY.format(seq=timeline_instance.event_seq))
    page.focus("#tl-text")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "timeline-scroll"
    scroll = page.locator("#timeline-scroll")
    assert scroll.evaluate("e => e.scrollHeight > e.clientHeight"), "the timeline does not overflow: nothing to scroll"
    page.keyboard.press("End")
    page.wait_for_function("() => document.getElementById('timeline-scroll').scrollTop > 0")


def test_every_page_passes_axe(page: Any, login: Callable[..., None], make_user: Callable[..., Any],
                               redis_conn: Any) -> None:
    from django.contrib.auth.models import User

    from workflows.models import WorkflowDefinition

    admin = User.objects.create_superuser("ada", password="pw")
    world = build_world(admin)
    page.context.add_init_script(path=str(AXE))
    checker = Checker(page)

    checker.visit("/accounts/login/")  # logged out
    checker.visit("/no/such/page/", status=404)
    login(page, admin)

    checker.visit("/", "#counts a.tile")
    checker.visit("/", "#daily[data-loaded='30']")
    checker.visit("/workflows/")
    checker.visit("/workflows/?archived=1")
    slug = world["slug"]
    for definition in WorkflowDefinition.objects.filter(archived=False).order_by("slug"):
        checker.visit(f"/workflows/{definition.slug}/")
    # The examples with every kind of node between them (order-desk's LLM node has MCP tools), then the
    # two kinds no example has.
    check_editors(checker, ["order-desk", "refund-saga", "support-desk", "planner-demo", "react-agent",
                            world["every_kind"]])
    checker.visit(f"/workflows/{slug}/triggers/")
    checker.visit(f"/workflows/{slug}/evaluations/")
    checker.visit(f"/evaluations/{world['evaluation'].pk}/")
    checker.visit("/instances/")
    for key in ("completed", "running", "halted", "loop", "waiting", "decided"):
        inst = world[key]
        inst.refresh_from_db()
        checker.visit(f"/instances/{inst.pk}/", LIVE_READY.format(seq=inst.event_seq))
        if key in ("completed", "loop"):  # the step inspector, drawn by the page's scripts
            node = inst.steps.order_by("-id").values_list("node_id", flat=True).first()
            page.evaluate("(id) => steadyflowLive.select(id)", node)
            page.wait_for_selector("#insp-runs > :not(p.hint)")
            checker.check(f"/instances/{inst.pk}/ inspecting {node}", skip_link=False)
        checker.visit(f"/instances/{inst.pk}/report/")
    checker.visit("/review/")
    checker.visit("/review/?status=")
    for key in ("halted_item", "waiting_item", "decided_item"):
        checker.visit(f"/review/{world[key].pk}/", "#review-graph[data-ready='1']")
    checker.visit(world["approve_link"])
    checker.visit("/credentials/")
    checker.visit("/credentials/shop_key/")
    checker.visit("/account/tokens/")
    # Not our markup, but pages we serve: the API docs (Swagger UI) and the admin's review pages.
    checker.visit("/api/v1/docs", ".opblock", skip_link=False)
    checker.visit("/admin/workflows/reviewitem/", skip_link=False)
    page.check(f"input[name=_selected_action][value='{world['halted_item'].pk}']")
    page.select_option("select[name=action]", "reject_selected")
    page.click("button[name=index]")
    page.wait_for_selector("text=Reject 1 review item(s)?")
    checker.check("/admin/workflows/reviewitem/ reject confirmation", skip_link=False)
    checker.visit(f"/admin/workflows/reviewitem/{world['halted_item'].pk}/decide/", skip_link=False)

    check_keyboard(page, world["loop"])
    # Signed out through the navigation's button, then a viewer is refused a designer's page: the 403 page.
    page.goto("/")
    page.click(".topbar button:has-text('Log out')")
    page.wait_for_url("**/accounts/login/")
    login(page, make_user("vera", "viewers"))
    checker.visit("/credentials/", status=403)

    print("\n".join(["moderate and minor (not failed):", *sorted(set(checker.others))]))
    assert checker.failures == [], "\n" + "\n".join(checker.failures)
    assert page.js_errors == []
