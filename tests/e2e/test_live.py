"""The live instance page in a real browser against daphne, with real worker processes running the
research example (industry-report): its HTTP nodes call a server started here that answers slowly, so
the nodes are seen running before they succeed.

The page's read-only `steadyflowLive` hook is used to read what is drawn (the node classes on the
canvas) and the order in which node states changed; everything else is done as a user would.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.management import call_command

from tests.conftest import wait_for_status
from workflows import runtime
from workflows.models import WorkflowDefinition, WorkflowInstance

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HTTP_DELAY_S = 1.5
WORK_NODES = ["plan", "market", "news", "competitors", "clean", "compare", "write"]
# What must have succeeded before each node may start (the example's edges).
AFTER = {"market": ["plan"], "news": ["plan"], "competitors": ["plan"], "clean": ["market", "news", "competitors"],
         "compare": ["clean"], "write": ["compare"], "done": ["write"]}


# Paths the research server answers with HTTP 404 (a permanent failure) while they are listed here.
BROKEN: set[str] = set()


class _Research(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        time.sleep(HTTP_DELAY_S)
        broken = any(self.path.startswith(p) for p in BROKEN)
        body = json.dumps({"path": self.path, "items": [{"title": "a finding"}]}).encode()
        self.send_response(404 if broken else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def research_server() -> Iterator[str]:
    BROKEN.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Research)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def worker_env(worker_env: dict[str, str], research_server: str) -> dict[str, str]:
    worker_env["STEADYFLOW_HTTP_ALLOWLIST"] = research_server.removeprefix("http://")
    return worker_env


@pytest.fixture
def operator(user_in: Any) -> Any:
    return user_in("operators", "olga")


def start_research(research_server: str) -> WorkflowInstance:
    call_command("load_examples", stdout=open("/dev/null", "w"))
    version = WorkflowDefinition.objects.get(slug="industry-report").latest_version()
    return runtime.start_instance(version, {"topic": "batteries", "research_base": research_server})


def open_instance(page: Any, instance: WorkflowInstance) -> None:
    """Open the page and wait until it is live and has what the event log held when it opened."""
    instance.refresh_from_db()
    page.goto(f"/instances/{instance.pk}/")
    page.wait_for_function("() => window.steadyflowLive && document.getElementById('conn').dataset.state === 'live'"
                           f" && steadyflowLive.store.lastSeq >= {instance.event_seq}")
    page.evaluate("window.__notReloaded = true")


def drawn(page: Any, node: str) -> str | None:
    return page.evaluate("(id) => steadyflowLive.renderedState(id)", node)


def history(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("steadyflowLive.history")


def node_center(page: Any, node: str) -> tuple[float, float]:
    pos = page.evaluate("(id) => steadyflowLive.cy.getElementById(id).renderedPosition()", node)
    box = page.locator("#cy").bounding_box()
    return box["x"] + pos["x"], box["y"] + pos["y"]


def inspect_node(page: Any, node: str) -> None:
    """Click `node` on the live graph until the inspector shows it. The graph re-fits as steps arrive (new
    nodes drawn, a layout pass), so a position read just before the click can be stale by the time it lands
    (seen on a loaded machine: the click opened a neighbour). The node is brought to the middle of the canvas
    at a readable zoom first, as a user would: fitted whole, a graph's nodes can overlap at their edges."""
    shown = "(id) => document.getElementById('insp-title').textContent.startsWith(id + ' ')"
    view = page.evaluate("({zoom: steadyflowLive.cy.zoom(), pan: steadyflowLive.cy.pan()})")
    try:
        _click_until_shown(page, node, shown)
    finally:  # the view as it was (the pictures taken next show the whole graph)
        page.evaluate("(v) => steadyflowLive.cy.viewport(v)", view)


def _click_until_shown(page: Any, node: str, shown: str) -> None:
    clicked = False
    for _ in range(10):
        # A click of ours that landed but whose inspector came after the wait (a loaded machine) is not
        # clicked again: a second click could unselect the node. (Not before our first click: the caller
        # wants the node's runs read afresh.)
        if clicked and page.evaluate(shown, node):
            return
        page.evaluate("(id) => { const cy = steadyflowLive.cy; cy.zoom(Math.max(cy.zoom(), 1));"
                      " cy.center(cy.getElementById(id)); }", node)
        before = node_center(page, node)
        page.wait_for_timeout(100)
        at = node_center(page, node)
        if at != before:  # still moving: read again
            continue
        page.mouse.click(*at)
        clicked = True
        try:
            page.wait_for_function(shown, arg=node, timeout=5_000)
            return
        except Exception:  # noqa: BLE001 - Playwright's TimeoutError: the graph moved under the click
            continue
    # What was there instead: the inspector's title and the element under the last click.
    title = page.evaluate("document.getElementById('insp-title').textContent")
    under = page.evaluate("([x, y]) => { const e = document.elementFromPoint(x, y);"
                          " return e ? e.outerHTML.slice(0, 200) : null; }", list(at)) if clicked else None
    raise AssertionError(f"the inspector never showed {node!r}: it shows {title!r}; under the last click: {under!r}")


def test_nodes_turn_running_then_succeeded_in_order_and_time_travel_shows_the_past(
        daphne_page: Any, login: Any, operator: Any, processes: Any, research_server: str, doc_shot: Any) -> None:
    page = daphne_page
    login(page, operator)
    instance = start_research(research_server)  # no worker yet: the page sees everything happen
    open_instance(page, instance)
    assert drawn(page, "start") == "succeeded" and drawn(page, "plan") == "queued"
    assert drawn(page, "market") is None

    processes.all_workers()
    processes.worker("io")  # a second io worker: the two HTTP branches run side by side
    # Seen while it happens: the HTTP branches hold for HTTP_DELAY_S, the LLM branch is done at once.
    page.wait_for_function("() => steadyflowLive.renderedState('market') === 'running'"
                           " && steadyflowLive.renderedState('news') === 'running'", timeout=30_000)
    assert drawn(page, "plan") == "succeeded" and drawn(page, "clean") is None
    assert page.locator("#inst-status").inner_text() == "running"
    inspect_node(page, "market")  # the inspector shows the run in progress
    page.locator("#insp-runs details.run").first.wait_for()
    doc_shot(page, "instance.png")

    page.wait_for_function("() => steadyflowLive.renderedState('done') === 'succeeded'", timeout=30_000)
    wait_for_status(instance, "completed", timeout=30)
    page.wait_for_function("() => document.getElementById('inst-status').textContent === 'completed'")
    assert page.evaluate("window.__notReloaded") is True
    assert page.evaluate("steadyflowLive.store.socketEvents") > 0

    # Every node went running -> succeeded, each after what it depends on.
    changes = history(page)
    for node in WORK_NODES:
        states = [c["state"] for c in changes if c["node"] == node]
        assert "running" in states and states[-1] == "succeeded", (node, states)
        assert states.index("running") < len(states) - 1, (node, states)
    succeeded_at: dict[str, int] = {}
    started_at: dict[str, int] = {}
    for c in changes:
        if c["state"] in ("running", "succeeded"):
            started_at.setdefault(c["node"], c["seq"])
        if c["state"] == "succeeded":
            succeeded_at.setdefault(c["node"], c["seq"])
    for node, before in AFTER.items():
        for dep in before:
            assert succeeded_at[dep] < started_at[node], f"{node} started before {dep} succeeded"
    instance.refresh_from_db()
    assert page.evaluate("steadyflowLive.store.lastSeq") == instance.event_seq
    for node in ["start", *WORK_NODES, "done"]:
        assert drawn(page, node) == "succeeded"
        assert page.locator(f".visit-badge[data-node='{node}']").inner_text() == "1"
    assert len(page.evaluate("steadyflowLive.takenEdges()")) == len(instance.version.graph["edges"])

    # The inspector: click the market node, see its run.
    inspect_node(page, "market")
    run = page.locator("#insp-runs details.run").first
    run.wait_for()
    text = run.inner_text()
    assert "succeeded" in text and "visit 1 · attempt 1" in text
    assert f"{instance.pk}:market:1" in text and "io" in text
    assert f"{research_server}/market?q=batteries" in text  # the rendered input
    assert page.locator("#btn-rerun").is_visible()  # an operator may rerun a finished instance

    # Time travel: the timeline row where market started shows the graph as it stood then.
    row = page.locator("#timeline tr.ev-step_started", has_text="market")
    row.click()
    page.wait_for_selector("#travel-banner:not([hidden])")
    assert drawn(page, "market") == "running"
    assert drawn(page, "plan") == "succeeded"
    assert drawn(page, "clean") is None and drawn(page, "write") is None
    page.click("#btn-step-back")  # one event earlier: market was only queued
    assert drawn(page, "market") == "queued"
    page.click("#btn-live")
    assert page.locator("#travel-banner").is_hidden()
    assert drawn(page, "write") == "succeeded"
    assert page.js_errors == []


def test_the_page_catches_up_after_its_socket_dies(
        daphne_page: Any, daphne_server: Any, login: Any, operator: Any, processes: Any,
        research_server: str) -> None:
    page = daphne_page
    login(page, operator)
    processes.all_workers()
    instance = start_research(research_server)
    open_instance(page, instance)
    page.wait_for_function("() => steadyflowLive.renderedState('market') === 'running'", timeout=30_000)

    daphne_server.kill()  # every socket drops; nothing reaches the page while the server is down
    page.wait_for_function("() => document.getElementById('conn').dataset.state === 'offline'")
    wait_for_status(instance, "completed", timeout=30)
    instance.refresh_from_db()
    assert page.evaluate("steadyflowLive.store.lastSeq") < instance.event_seq
    assert drawn(page, "write") is None

    daphne_server.start()  # same port: the page reconnects and fetches what it missed
    page.wait_for_function(f"() => steadyflowLive.store.lastSeq === {instance.event_seq}", timeout=20_000)
    page.wait_for_function("() => document.getElementById('conn').dataset.state === 'live'")
    for node in ["start", *WORK_NODES, "done"]:
        assert drawn(page, node) == "succeeded"
    assert page.locator("#inst-status").inner_text() == "completed"
    assert page.evaluate("window.__notReloaded") is True
    assert page.evaluate("steadyflowLive.store.fetchedEvents") > 0
    assert page.js_errors == []


def test_an_operator_retries_a_failed_step_from_the_page(
        daphne_page: Any, login: Any, operator: Any, processes: Any, research_server: str) -> None:
    page = daphne_page
    login(page, operator)
    BROKEN.add("/news")
    processes.all_workers()
    instance = start_research(research_server)
    open_instance(page, instance)
    wait_for_status(instance, "failed", timeout=30)
    page.wait_for_function("() => document.getElementById('inst-status').textContent === 'failed'")
    assert drawn(page, "news") == "failed"
    page.wait_for_selector("#btn-retry:not([hidden])")
    assert page.locator("#btn-cancel").is_hidden()

    inspect_node(page, "news")  # the inspector shows why
    run = page.locator("#insp-runs details.run").first
    run.wait_for()
    assert "failed" in run.inner_text() and "HTTP 404 from" in run.inner_text()

    BROKEN.clear()
    page.click("#btn-retry")
    page.wait_for_function("() => document.getElementById('inst-status').textContent === 'completed'", timeout=30_000)
    wait_for_status(instance, "completed", timeout=10)
    for node in ["start", *WORK_NODES, "done"]:
        assert drawn(page, node) == "succeeded"
    news = instance.steps.get(node_id="news")
    assert (news.visit, news.attempt, news.status) == (1, 2, "succeeded")
    assert page.evaluate("window.__notReloaded") is True
    assert page.js_errors == []


def test_a_click_lands_on_its_node_after_the_header_grows(daphne_page: Any, login: Any, operator: Any,
                                                          research_server: str) -> None:
    """Cytoscape caches where its canvas is on the page; when the header above it grows (a failed run's
    error line) the canvas moves without changing size, and a click must still reach the node under it."""
    page = daphne_page
    login(page, operator)
    instance = start_research(research_server)  # no worker: it stays running
    open_instance(page, instance)
    shown = "(id) => document.getElementById('insp-title').textContent.startsWith(id + ' ')"
    page.mouse.click(*node_center(page, "start"))  # Cytoscape measures its canvas on this first click
    page.wait_for_function(shown, arg="start", timeout=5_000)
    box = page.locator("#cy").bounding_box()
    # 160 px more header, as a failed run's error line adds (a block of our own: the page's refresh of its
    # facts, which may come at any moment, shows and hides the error line itself).
    page.evaluate("() => { const e = document.createElement('div'); e.style.height = '160px';"
                  " document.querySelector('.live-head .title').appendChild(e); }")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    assert page.locator("#cy").bounding_box()["y"] >= box["y"] + 150  # the canvas moved down
    page.mouse.click(*node_center(page, "plan"))
    page.wait_for_function(shown, arg="plan", timeout=5_000)
    assert page.js_errors == []


def test_the_dashboard_counts_update_live(daphne_page: Any, login: Any, operator: Any,
                                          research_server: str) -> None:
    page = daphne_page
    login(page, operator)
    page.goto("/")
    page.wait_for_function("() => document.getElementById('conn').dataset.state === 'live'")
    page.evaluate("window.__notReloaded = true")
    tile = page.locator(".tile[data-status='running'] .n")
    assert tile.inner_text() == "0"
    start_research(research_server)  # no worker runs it: it stays running
    page.wait_for_function("() => document.querySelector(\".tile[data-status='running'] .n\").textContent === '1'",
                           timeout=10_000)
    instance = WorkflowInstance.objects.get()
    runtime.cancel_instance(instance.pk, "done watching")
    # 30 s: CI's serial tier runs at a load of ~10 on two cores, where this update once took longer than 10 s.
    page.wait_for_function("() => document.querySelector(\".tile[data-status='cancelled'] .n\").textContent === '1'",
                           timeout=30_000)
    assert tile.inner_text() == "0"
    assert page.evaluate("window.__notReloaded") is True
    assert page.js_errors == []
