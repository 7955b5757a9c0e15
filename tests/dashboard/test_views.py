"""The instance page, the instance list, the dashboard and their JSON endpoints (dashboard/pages/views.py,
dashboard/api/instance_api.py): permissions, filters, figures and the operators' actions over HTTP.

The pages' behaviour in a browser is covered by tests/e2e/test_live.py."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from tests.conftest import halts_as_it_starts
from tests.dashboard.test_operations import FAILING, chain_graph, graph, node, run_queued, start
from workflows.models import BreakerState, ReviewItem, StepRun, WorkflowInstance

pytestmark = pytest.mark.django_db

VIEWER = ("view_workflowinstance",)
OPERATOR = ("view_workflowinstance", "operate_workflowinstance", "decide_reviewitem")


@pytest.fixture(autouse=True)
def _clear_failing() -> Any:
    from django.core.cache import cache

    FAILING.clear()
    cache.clear()  # the dashboard's figures are cached for a second or five
    yield
    FAILING.clear()


@pytest.fixture
def client_for(django_user_model: Any) -> Callable[..., Client]:
    """A logged-in client for a new user holding exactly these workflows permissions (the roles'
    groups come from a data migration that transactional tests flush, so permissions are given)."""
    made = {"n": 0}

    def make(*codenames: str) -> Client:
        made["n"] += 1
        user = django_user_model.objects.create_user(f"user{made['n']}")  # no password: no hashing
        user.user_permissions.add(*Permission.objects.filter(content_type__app_label="workflows",
                                                             codename__in=codenames))
        client = Client()
        client.force_login(user)
        return client

    return make


def page_config(response: Any) -> dict[str, Any]:
    match = re.search(r'<script id="live-config" type="application/json">(.*?)</script>', response.content.decode(),
                      re.S)
    assert match, "the page carries its configuration"
    return json.loads(match.group(1))


def post(client: Client, url: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(url, json.dumps(body or {}), content_type="application/json")


# --- The instance page --------------------------------------------------------------------------

def test_the_instance_page_needs_login_and_the_view_permission(client_for: Callable[..., Client]) -> None:
    inst = start(chain_graph())
    url = f"/instances/{inst.pk}/"
    assert Client().get(url).status_code == 302
    assert client_for().get(url).status_code == 403
    assert client_for(*VIEWER).get(f"/instances/{inst.pk + 999}/").status_code == 404

    response = client_for(*VIEWER).get(url)
    assert response.status_code == 200
    config = page_config(response)
    assert config["instance"]["id"] == inst.pk and config["instance"]["status"] == "running"
    assert [n["id"] for n in config["graph"]["nodes"]] == ["start", "a", "b", "c", "end"]
    assert config["urls"]["ws"] == f"/ws/instances/{inst.pk}/"
    assert config["urls"]["events"] == f"/api/instances/{inst.pk}/events"
    assert {t["name"] for t in config["nodeTypes"]} >= {"start", "python", "llm", "end"}
    assert config["canOperate"] is False and config["canDecide"] is False and config["review"] is None
    assert b"static/js/live/main.js" in response.content and b'id="sf-meta"' in response.content

    operator = page_config(client_for(*OPERATOR).get(url))
    assert operator["canOperate"] is True and operator["canDecide"] is True


def test_the_page_of_a_halted_instance_carries_its_open_review_item(client_for: Callable[..., Client]) -> None:
    inst = run_queued(start(halts_as_it_starts()))
    assert inst.status == "halted" and inst.halt_reason == "loop_breaker"
    item = ReviewItem.objects.get(instance=inst, status="open")
    config = page_config(client_for(*OPERATOR).get(f"/instances/{inst.pk}/"))
    assert config["review"]["id"] == item.pk and config["review"]["reason"] == "loop_breaker"
    assert "approve" in config["reviewActions"]


# --- JSON endpoints -----------------------------------------------------------------------------

def test_steps_endpoint_lists_each_run_for_the_inspector(client_for: Callable[..., Client]) -> None:
    FAILING.add("b")
    inst = run_queued(start(chain_graph()))
    viewer = client_for(*VIEWER)
    data = viewer.get(f"/api/instances/{inst.pk}/steps").json()
    assert [s["node"] for s in data["steps"]] == ["start", "a", "b"]
    b = viewer.get(f"/api/instances/{inst.pk}/steps?node=b").json()["steps"]
    assert len(b) == 1
    run = b[0]
    assert run["status"] == "failed" and run["attempt"] == 1 and run["visit"] == 1
    assert run["queue"] == "default" and run["worker"] == "test-worker"
    assert run["idempotency_key"] == f"{inst.pk}:b:1"
    assert run["error"]["message"] == "b is told to fail" and run["error"]["permanent"] is True
    assert run["input"] == {"function": "live.flaky"}
    assert run["duration_ms"] is not None and run["tokens"] == 0 and run["cost_usd"] == 0.0
    assert client_for().get(f"/api/instances/{inst.pk}/steps").json()["message"].startswith("permission denied")
    missing = viewer.get("/api/instances/999999/steps")
    assert missing.status_code == 404 and missing.json() == {"message": "instance 999999 does not exist"}
    assert Client().get(f"/api/instances/{inst.pk}/steps").status_code == 401


def test_the_inspector_gets_the_traceback_of_an_unexpected_exception(client_for: Callable[..., Client]) -> None:
    inst = run_queued(start(graph([node("bug", "live.broken")], [("start", "bug"), ("bug", "end")])))
    assert inst.status == "failed"
    run = client_for(*VIEWER).get(f"/api/instances/{inst.pk}/steps?node=bug").json()["steps"][0]
    assert run["error"]["message"] == "KeyError: 'missing'" and run["error"]["exception"] == "KeyError"
    assert "Traceback (most recent call last)" in run["error"]["traceback"]
    assert 'in broken\n    {}["missing"]' in run["error"]["traceback"]


def test_operators_retry_rerun_and_cancel_over_the_api_and_viewers_may_not(
        client_for: Callable[..., Client]) -> None:
    FAILING.add("b")
    inst = run_queued(start(chain_graph()))
    viewer, operator = client_for(*VIEWER), client_for(*OPERATOR)
    for action in ("cancel", "retry", "rerun"):
        denied = post(viewer, f"/api/instances/{inst.pk}/{action}")
        assert denied.status_code == 403
        assert denied.json()["message"].startswith(
            "permission denied: you need workflows.operate_workflowinstance (the operators group)")
    assert viewer.get(f"/api/instances/{inst.pk}/retry").status_code == 405

    FAILING.clear()
    retried = post(operator, f"/api/instances/{inst.pk}/retry", {"note": "go"})
    assert retried.status_code == 200, retried.content
    assert retried.json()["instance"]["status"] == "running" and retried.json()["step"]["node"] == "b"
    again = post(operator, f"/api/instances/{inst.pk}/retry")
    assert again.status_code == 409
    assert again.json()["message"] == (f"instance {inst.pk} is running: only a failed instance's failed step "
                                       "can be retried")
    inst = run_queued(inst)
    assert inst.status == "completed"

    bad = post(operator, f"/api/instances/{inst.pk}/rerun", {})
    assert bad.status_code == 400 and bad.json()["message"] == "'node' (the node to rerun from) is required"
    assert post(operator, f"/api/instances/{inst.pk}/rerun", {"node": "zzz"}).status_code == 404
    rerun = post(operator, f"/api/instances/{inst.pk}/rerun", {"node": "c"})
    assert rerun.status_code == 200 and rerun.json()["step"]["visit"] == 2

    cancelled = post(operator, f"/api/instances/{inst.pk}/cancel", {"note": "enough"})
    assert cancelled.status_code == 200 and cancelled.json()["instance"]["status"] == "cancelled"
    not_json = operator.post(f"/api/instances/{inst.pk}/cancel", "{", content_type="application/json")
    assert not_json.status_code == 400 and "not valid JSON" in not_json.json()["message"]


def test_review_decisions_on_a_halted_instance(client_for: Callable[..., Client]) -> None:
    inst = run_queued(start(halts_as_it_starts()))
    assert inst.status == "halted"
    url = f"/api/instances/{inst.pk}/review"
    no_decide = client_for("view_workflowinstance", "operate_workflowinstance")
    assert post(no_decide, url, {"action": "approve"}).status_code == 403
    operator = client_for(*OPERATOR)
    unknown = post(operator, url, {"action": "frobnicate"})
    assert unknown.status_code == 400 and "unknown action" in unknown.json()["message"]
    approved = post(operator, url, {"action": "approve", "extra_transitions": 10, "note": "more room"})
    assert approved.status_code == 200, approved.content
    assert approved.json()["instance"]["status"] == "running"
    inst = run_queued(inst)
    assert inst.status == "completed"
    late = post(operator, url, {"action": "approve"})
    assert late.status_code == 409 and late.json()["message"] == f"instance {inst.pk} has no open review item"


def test_approving_a_loop_breaker_halt_adds_the_graphs_default_limit_again(client_for: Callable[..., Client]) -> None:
    """A graph with no max_transitions gets one pass over its 13 nodes (more than the configured 10);
    an approval without a grant adds that again, not the configured default."""
    body = [f"s{i}" for i in range(1, 11)]
    ids = ["start", "a", *body, "end"]
    looping = {"nodes": [{"id": "start", "type": "start"}, *(node(n) for n in ids[1:-1]), {"id": "end", "type": "end"}],
               "edges": [*({"source": x, "target": y} for x, y in zip(ids[1:-1], ids[2:-1], strict=False)),
                         {"source": "start", "target": "a"}, {"source": "s10", "target": "a", "when": "True"},
                         {"source": "s10", "target": "end", "when": "False"}]}
    inst = run_queued(start(looping))
    assert inst.status == "halted" and inst.halt_reason == "loop_breaker", inst.error
    assert inst.max_transitions == inst.loop_count == 13
    approved = post(client_for(*OPERATOR), f"/api/instances/{inst.pk}/review", {"action": "approve"})
    assert approved.status_code == 200, approved.content
    inst.refresh_from_db()
    assert inst.max_transitions == 26
    inst = run_queued(inst)
    assert inst.status == "halted" and inst.loop_count == 26


def test_dashboard_stats(client_for: Callable[..., Client]) -> None:
    FAILING.add("b")
    failed = run_queued(start(chain_graph()))
    FAILING.clear()
    run_queued(start(chain_graph()))
    start(chain_graph())
    BreakerState.objects.create(key="openai:gpt-4o-mini", state="open", opened_at=timezone.now().timestamp(),
                                buckets={str(int(timezone.now().timestamp() // 5 * 5)): [6, 5]})
    viewer = client_for(*VIEWER)
    assert client_for().get("/api/dashboard").status_code == 403
    stats = viewer.get("/api/dashboard").json()

    assert stats["counts"]["failed"] == 1 and stats["counts"]["completed"] == 1 and stats["counts"]["running"] == 1
    minutes = stats["steps"]["minutes"]
    assert len(minutes) == 60
    hour = stats["steps"]["hour"]
    # a, c and the failed b of the two finished instances: structural start/end steps are left out.
    assert (hour["ok"], hour["failed"]) == (4, 1)
    assert sum(m["ok"] for m in minutes) == 4 and sum(m["failed"] for m in minutes) == 1
    assert hour["p50_ms"] is not None and hour["p95_ms"] >= hour["p50_ms"]
    assert stats["failures"][0]["id"] == failed.pk and stats["failures"][0]["node"] == "b"
    assert stats["failures"][0]["message"] == "step 'b' failed: b is told to fail"
    breaker = stats["breakers"][0]
    assert (breaker["key"], breaker["state"], breaker["calls"], breaker["failures"]) == \
        ("openai:gpt-4o-mini", "open", 6, 5)
    assert breaker["cooldown_left_s"] > 0
    assert [q["name"] for q in stats["queues"]["queues"]] == ["ai", "io", "default"]
    assert stats["reviews"]["open"] == 0


def test_dashboard_page(client_for: Callable[..., Client]) -> None:
    assert client_for().get("/").status_code == 403
    response = client_for(*VIEWER).get("/")
    assert response.status_code == 200
    assert b'id="dashboard-stats"' in response.content and b"js/dashboard/main.js" in response.content


# --- The instance list --------------------------------------------------------------------------

def test_instance_list_filters_searches_and_pages(client_for: Callable[..., Client],
                                                  django_assert_max_num_queries: Any) -> None:
    FAILING.add("b")
    failed = run_queued(start(chain_graph()))
    FAILING.clear()
    done = [run_queued(start(chain_graph())) for _ in range(2)]
    for inst in done:
        inst.refresh_from_db()
    WorkflowInstance.objects.filter(pk=done[0].pk).update(created_at=timezone.now() - timedelta(days=3))
    client = client_for(*VIEWER)

    def ids(query: str) -> list[int]:
        html = client.get(f"/instances/?{query}").content.decode()
        return [int(i) for i in re.findall(r'<td><a href="/instances/(\d+)/">', html)]

    everything = ids("")
    assert everything == sorted([failed.pk, *[d.pk for d in done]], reverse=True)
    assert ids("status=failed") == [failed.pk]
    assert ids("reason=step_failed") == [failed.pk]
    assert ids(f"workflow={failed.version.definition.slug}") == [failed.pk]
    assert ids(f"q={done[1].pk}") == [done[1].pk]
    assert ids(f"q=%23{done[1].pk}") == [done[1].pk]
    trace = done[1].trace_id.split("-")[1]
    assert ids(f"q={trace}") == [done[1].pk]
    assert ids(f"q={done[1].trace_id}") == [done[1].pk]
    today = timezone.now().date().isoformat()
    assert done[0].pk not in ids(f"from={today}")
    assert ids(f"to={(timezone.now() - timedelta(days=2)).date().isoformat()}") == [done[0].pk]
    bad = client.get("/instances/?from=yesterday").content.decode()
    assert "&#x27;from&#x27; must be a date like 2026-01-31" in bad
    # An unknown status is named (it used to filter down to nothing without a word) and not applied.
    bad = client.get("/instances/?status=finished").content.decode()
    assert "&#x27;status&#x27; must be one of pending, running, waiting" in bad
    assert "not &#x27;finished&#x27;: showing every status" in bad
    assert ids("status=finished") == everything

    # Paginated, 50 a page, newest first; the query count does not grow with the page size.
    version = failed.version
    now = timezone.now()
    WorkflowInstance.objects.bulk_create([
        WorkflowInstance(version=version, definition_id=version.definition_id, status="completed", max_transitions=10,
                         created_at=now, updated_at=now)
        for _ in range(120)])
    with django_assert_max_num_queries(8):
        first = client.get("/instances/")
    html = first.content.decode()
    assert "123 instances" in html and "page 1 of 3" in html and 'rel="next"' in html
    assert len(re.findall(r'<td><a href="/instances/(\d+)/">', html)) == 50
    last = client.get("/instances/?status=completed&page=3").content.decode()
    assert "page 3 of 3" in last and 'href="?status=completed&amp;page=2"' in last
    # One date format on every page: ISO-like, to the second, with the time zone.
    stamp = timezone.localtime(failed.created_at).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert stamp in html or stamp in client.get(f"/instances/?q={failed.pk}").content.decode()
    assert client_for().get("/instances/").status_code == 403


def test_step_rows_for_the_inspector_are_capped(client_for: Callable[..., Client]) -> None:
    inst = start(chain_graph())
    now = timezone.now()
    StepRun.objects.bulk_create([
        StepRun(instance=inst, node_id="a", node_type="python", visit=v, queue="default", status="succeeded",
                idempotency_key=f"{inst.pk}:a:{v}", trace_id=inst.trace_id, created_at=now)
        for v in range(2, 1003)])
    data = client_for(*VIEWER).get(f"/api/instances/{inst.pk}/steps?node=a").json()
    assert len(data["steps"]) == 1000 and data["truncated"] is True


def test_every_page_links_the_favicon(client: Client) -> None:
    from django.contrib.staticfiles import finders

    html = client.get("/accounts/login/").content.decode()
    assert re.search(r'<link rel="icon" type="image/svg\+xml" href="/static/favicon\.svg">', html)
    path = finders.find("favicon.svg")
    assert path and open(path).read().startswith("<svg")
