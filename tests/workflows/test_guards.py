"""Guards (loop breaker, TTL, budget, circuit breaker), human tasks and compensation, on real workers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from tests.conftest import chain, past_deadline, wait_for, wait_for_status
from workflows import runtime
from workflows.models import AuditEntry, ReviewItem, WorkflowDefinition
from workflows.operators import review


class Ledger:
    """A local payments API: records each request (path, Idempotency-Key); per-path status codes."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.status: dict[str, int] = {}
        ledger = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                path = self.path.split("?")[0]
                ledger.requests.append((path, self.headers.get("Idempotency-Key", "")))
                code = ledger.status.get(path, 200)
                body = json.dumps({"ok": code < 400, "path": path}).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]


@pytest.fixture
def ledger():
    server = Ledger()
    yield server
    server.server.shutdown()


@pytest.fixture
def operator(transactional_db, user_in):
    return user_in("operators", "olga")


def _workers(processes, **env: str) -> None:
    extra = {"STEADYFLOW_HTTP_ALLOWLIST": "127.0.0.1", **env}
    processes.worker("default", env=extra)
    processes.worker("io", env=extra)
    processes.worker("ai", "--sync", env=extra)
    processes.scheduler(env=extra)


def _start_refund(ledger: Ledger, request_id: str, amount: int) -> Any:
    """Start refund-saga against the local ledger and wait for its human approval step."""
    version = WorkflowDefinition.objects.get(slug="refund-saga").latest_version()
    instance = runtime.start_instance(version, {"request_id": request_id, "amount": amount,
                                                 "ledger_base": ledger.base, "notify_base": ledger.base})
    return wait_for_status(instance, "waiting", timeout=60)


@pytest.mark.django_db(transaction=True)
def test_seed_loop_halts_at_exactly_ten_and_resumes_when_granted_more(processes, operator):
    call_command("load_examples")
    _workers(processes)
    version = WorkflowDefinition.objects.get(slug="hallucination-loop").latest_version()
    instance = runtime.start_instance(version, {"ticket": "T-7"})
    wait_for_status(instance, "halted", timeout=60)
    assert instance.halt_reason == "loop_breaker"
    assert instance.loop_count == 10
    assert instance.steps.count() == 10  # the 11th activation never ran
    item = ReviewItem.objects.get(instance=instance, status="open")
    assert item.details["path"] == ["start"] + ["node_a", "node_b"] * 4 + ["node_a"]
    assert item.details["next"] == ["node_b"]

    review.decide(item.pk, operator, review.Decision(action="approve", extra_transitions=4, note="one more try"))
    item.refresh_from_db()
    assert item.status == "approved" and item.decided_by == operator
    # The model keeps looping, so it halts again after exactly the 4 granted activations.
    wait_for(lambda: ReviewItem.objects.filter(instance=instance, status="open").exists(), 60,
             message="the second loop-breaker halt")
    instance.refresh_from_db()
    assert instance.status == "halted" and instance.loop_count == 14 and instance.max_transitions == 14
    types = list(instance.events.values_list("type", flat=True))
    assert types.count("instance_halted") == 2 and "instance_resumed" in types
    audit = AuditEntry.objects.get(instance=instance)
    assert audit.before["max_transitions"] == 10 and audit.after["max_transitions"] == 14


@pytest.mark.django_db(transaction=True)
def test_budget_halts_and_continues_with_more_budget(processes, operator, make_version):
    llm = {"provider": "scripted", "prompt": "x", "script": [{"text": "ok", "usage": {
        "prompt_tokens": 100, "completion_tokens": 50, "cost_usd": 0.3}}]}
    graph = chain(*[{"id": f"ask{i}", "type": "llm", "config": llm} for i in range(3)],
                  settings={"budget_usd": 0.5})
    version = make_version(graph)
    _workers(processes)
    instance = runtime.start_instance(version, {})
    wait_for_status(instance, "halted", timeout=60)
    assert instance.halt_reason == "budget_exceeded"
    assert float(instance.cost_usd) == pytest.approx(0.6)
    assert instance.tokens == 300
    assert list(instance.steps.filter(node_type="llm").values_list("node_id", flat=True)) == ["ask0", "ask1"]
    item = instance.reviews.get(status="open")
    assert item.details["budget_usd"] == 0.5

    with pytest.raises(review.ReviewError, match="still over its budget"):
        review.decide(item.pk, operator, review.Decision(action="approve"))
    review.decide(item.pk, operator, review.Decision(action="approve", extra_budget_usd="1.0"))
    wait_for_status(instance, "completed", timeout=60)
    assert float(instance.cost_usd) == pytest.approx(0.9)


@pytest.mark.django_db(transaction=True)
def test_ttl_halts_a_waiting_instance_and_resume_extends_the_deadline(processes, operator, make_version):
    graph = chain({"id": "nap", "type": "wait", "config": {"seconds": 2}}, settings={"ttl_s": 1})
    version = make_version(graph)
    _workers(processes)
    instance = runtime.start_instance(version, {})
    wait_for_status(instance, "halted", timeout=30)
    assert instance.halt_reason == "ttl_expired"
    nap = instance.steps.get(node_id="nap")
    assert nap.status == "pending"  # parked, not lost
    item = instance.reviews.get(status="open")
    review.decide(item.pk, operator, review.Decision(action="approve", extra_ttl_s=60))
    instance.refresh_from_db()
    assert (instance.deadline - nap.created_at).total_seconds() > 59
    wait_for_status(instance, "completed", timeout=30)


@pytest.mark.django_db(transaction=True)
def test_refund_saga_human_approval_pays_with_idempotency_keys(processes, operator, ledger):
    call_command("load_examples")
    _workers(processes)
    instance = _start_refund(ledger, "R-1", 42)
    task = ReviewItem.objects.get(instance=instance, reason="human_task", status="open")
    assert task.details["prompt"] == "Approve refund of 42?"
    assert ledger.paths() == ["/reserve"]

    review.decide(task.pk, operator, review.Decision(action="approve", note="looks fine"))
    wait_for_status(instance, "completed", timeout=60)
    assert ledger.paths() == ["/reserve", "/pay", "/send"]
    keys = [key for _, key in ledger.requests]
    assert keys == [f"{instance.pk}:reserve:1", f"{instance.pk}:pay:1", f"{instance.pk}:notify:1"]
    approve = instance.steps.get(node_id="approve")
    assert approve.output["approved"] is True and approve.output["answered_by"] == "olga"


@pytest.mark.django_db(transaction=True)
def test_refund_saga_human_rejection_takes_the_reject_path(processes, operator, ledger):
    call_command("load_examples")
    _workers(processes)
    instance = _start_refund(ledger, "R-2", 5)
    task = ReviewItem.objects.get(instance=instance, reason="human_task")
    review.decide(task.pk, operator, review.Decision(action="reject", note="not eligible"))
    wait_for_status(instance, "completed", timeout=60)
    assert instance.state["ended"] == "reject"
    assert ledger.paths() == ["/reserve"]


@pytest.mark.django_db(transaction=True)
def test_failed_payment_compensates_completed_steps_in_reverse(processes, operator, ledger):
    call_command("load_examples")
    ledger.status["/pay"] = 400  # a permanent refusal: no retry helps
    _workers(processes)
    instance = _start_refund(ledger, "R-3", 9)
    review.decide(ReviewItem.objects.get(instance=instance).pk, operator, review.Decision(action="approve"))
    wait_for_status(instance, "compensated", timeout=60)
    assert ledger.paths() == ["/reserve", "/pay", "/release"]
    assert ledger.requests[-1][1] == f"{instance.pk}:compensate:reserve:1"
    assert instance.steps.get(node_id="reserve").status == "compensated"
    types = list(instance.events.values_list("type", flat=True))
    assert types.index("instance_failed") < types.index("compensation_started") < types.index("instance_compensated")


@pytest.mark.django_db(transaction=True)
def test_failing_compensation_halts_into_review_and_retry_finishes_it(processes, operator, ledger):
    call_command("load_examples")
    ledger.status["/pay"] = 400
    ledger.status["/release"] = 400
    _workers(processes)
    instance = _start_refund(ledger, "R-4", 9)
    review.decide(ReviewItem.objects.get(instance=instance).pk, operator, review.Decision(action="approve"))
    wait_for_status(instance, "halted", timeout=60)
    assert instance.halt_reason == "compensation_failed"
    item = instance.reviews.get(status="open")
    ledger.status["/release"] = 200
    review.decide(item.pk, operator, review.Decision(action="retry", note="ledger fixed"))
    wait_for_status(instance, "compensated", timeout=60)
    assert ledger.paths().count("/release") == 2


@pytest.mark.django_db(transaction=True)
def test_scripted_provider_failures_open_the_breaker_and_fallbacks_route(processes, operator, make_version):
    """Every call fails: after the minimum number of calls the breaker opens; a node with a rule
    fallback routes without calling, a node without one halts into review."""
    failing = {"provider": "scripted", "prompt": "x", "routes": ["a", "b"], "script": [{"error": "HTTP 500"}]}
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "ask", "type": "llm", "config": failing, "fallback": {"mode": "rule", "route": "b"}},
            {"id": "a", "type": "end"},
            {"id": "b", "type": "end"},
        ],
        "edges": [
            {"source": "start", "target": "ask"},
            {"source": "ask", "target": "a", "when": "route == 'a'"},
            {"source": "ask", "target": "b", "when": "route == 'b'"},
        ],
    }
    version = make_version(graph)
    env = {"STEADYFLOW_BREAKER_MIN_CALLS": "3", "STEADYFLOW_BREAKER_COOLDOWN_S": "600"}
    _workers(processes, **env)
    failed = [runtime.start_instance(version, {}) for _ in range(3)]
    for instance in failed:
        wait_for_status(instance, "failed", timeout=60)
    from workflows.models import BreakerState

    assert BreakerState.objects.get(key="scripted").state == "open"
    routed = runtime.start_instance(version, {})
    wait_for_status(routed, "completed", timeout=60)
    step = routed.steps.get(node_id="ask")
    assert step.degraded and step.output["route"] == "b" and step.output["fallback"] is True

    no_fallback = make_version({**graph, "nodes": [{k: v for k, v in n.items() if k != "fallback"}
                                                   for n in graph["nodes"]]})
    halted = runtime.start_instance(no_fallback, {})
    wait_for_status(halted, "halted", timeout=60)
    assert halted.halt_reason == "circuit_open"
    assert halted.steps.get(node_id="ask").status == "pending"


@pytest.mark.django_db(transaction=True)
def test_viewer_cannot_decide_and_four_eyes_blocks_the_starter(transactional_db, operator, make_version,
                                                              settings, user_in):
    viewer = user_in("viewers", "vera")
    version = make_version(chain({"id": "nap", "type": "wait", "config": {"seconds": 60}},
                                 settings={"ttl_s": 0.001}))
    instance = runtime.start_instance(version, {}, user=operator)
    assert runtime.expire_instance(instance.pk, now=past_deadline(instance))
    item = ReviewItem.objects.get(instance=instance)
    with pytest.raises(review.ReviewForbidden, match="the operators group"):
        review.decide(item.pk, viewer, review.Decision(action="approve"))
    settings.STEADYFLOW = {**settings.STEADYFLOW, "REVIEW_FOUR_EYES": True}
    with pytest.raises(review.ReviewForbidden, match="four-eyes"):
        review.decide(item.pk, operator, review.Decision(action="approve"))
    # Rejecting is still allowed to the starter.
    review.decide(item.pk, operator, review.Decision(action="reject", note="never mind"))
    instance.refresh_from_db()
    assert instance.status == "failed" and instance.halt_reason == "rejected"
    with pytest.raises(review.ReviewConflict, match="already rejected by olga"):
        review.decide(item.pk, operator, review.Decision(action="approve"))


@pytest.mark.django_db(transaction=True)
def test_reroute_and_edit_context(transactional_db, operator, make_version):
    graph = chain({"id": "nap", "type": "wait", "config": {"seconds": 60}},
                  {"id": "after", "type": "wait", "config": {"seconds": 0}}, settings={"ttl_s": 0.001})
    version = make_version(graph)
    instance = runtime.start_instance(version, {"a": 1})
    assert runtime.expire_instance(instance.pk, now=past_deadline(instance))
    item = ReviewItem.objects.get(instance=instance)
    with pytest.raises(review.ReviewError, match="reroute needs a node"):
        review.decide(item.pk, operator, review.Decision(action="reroute", goto="nowhere"))
    review.decide(item.pk, operator, review.Decision(action="reroute", goto="after", context={"a": 2, "b": 3}))
    instance.refresh_from_db()
    assert instance.status == "running" and instance.context == {"a": 2, "b": 3}
    assert instance.steps.get(node_id="nap").status == "cancelled"
    assert instance.steps.get(node_id="after").status == "queued"
    audit = AuditEntry.objects.get(instance=instance)
    assert audit.after["context_diff"] == {"added": ["b"], "removed": [], "changed": ["a"]}


@pytest.mark.django_db(transaction=True)
def test_two_operators_deciding_at_once_exactly_one_applies(transactional_db, operator, make_version, user_in):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("row locks (select_for_update) need PostgreSQL; SQLite serialises writers instead")
    other = user_in("operators", "otto")
    version = make_version(chain({"id": "nap", "type": "wait", "config": {"seconds": 60}},
                                 settings={"ttl_s": 0.001}))
    for _ in range(5):
        instance = runtime.start_instance(version, {})
        assert runtime.expire_instance(instance.pk, now=past_deadline(instance))
        item = ReviewItem.objects.get(instance=instance)
        barrier = threading.Barrier(2)
        results: list[str] = []

        def decide(user: User, action: str, item=item, barrier=barrier, results=results) -> None:
            barrier.wait()
            try:
                review.decide(item.pk, user, review.Decision(action=action))
                results.append(f"ok:{action}")
            except review.ReviewConflict:
                results.append("conflict")
            finally:
                connection.close()

        threads = [threading.Thread(target=decide, args=(operator, "approve")),
                   threading.Thread(target=decide, args=(other, "reject"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(r.split(":")[0] for r in results) == ["conflict", "ok"]
        item.refresh_from_db()
        assert AuditEntry.objects.filter(review=item).count() == 1
        assert item.status in ("approved", "rejected")



@pytest.mark.django_db(transaction=True)
def test_failing_provider_opens_the_breaker_and_recovery_closes_it(processes, operator, make_version, settings):
    """A local OpenAI-compatible server answering 500/429: the breaker opens within its window, a
    rule fallback routes, a node without one halts, and after recovery the halted instance resumes
    in bulk, its call is the half-open trial, and the breaker closes."""
    from tests.support.llm_server import LLMTestServer
    from workflows.models import BreakerState

    server = LLMTestServer(status=500).start()
    try:
        server.configure(script=[429])
        llm = {"provider": "openai", "model": "m1", "prompt": "hi"}
        with_rule = make_version(chain({"id": "ask", "type": "llm", "config": llm,
                                        "fallback": {"mode": "rule", "output": {"text": "static answer"}}}))
        without = make_version(chain({"id": "ask", "type": "llm", "config": llm}))
        # m1 is declared (LLM_PRICES), so it has a breaker of its own: `openai:m1`.
        env = {"STEADYFLOW_LLM_BASE_URL": server.url, "STEADYFLOW_BREAKER_MIN_CALLS": "3",
               "STEADYFLOW_BREAKER_COOLDOWN_S": "2", "STEADYFLOW_BREAKER_WINDOW_S": "60",
               "STEADYFLOW_LLM_PRICES": json.dumps({"m1": {}})}
        settings.STEADYFLOW = {**settings.STEADYFLOW, "BREAKER_COOLDOWN_S": 2.0, "BREAKER_MIN_CALLS": 3}
        processes.worker("default", env=env)
        processes.worker("ai", env=env)
        processes.scheduler(env=env)
        for _ in range(3):
            wait_for_status(runtime.start_instance(without, {}), "failed", timeout=60)
        assert BreakerState.objects.get(key="openai:m1").state == "open"
        calls = len(server.requests)
        assert calls == 3

        degraded = runtime.start_instance(with_rule, {})
        wait_for_status(degraded, "completed", timeout=60)
        assert degraded.steps.get(node_id="ask").output["text"] == "static answer"
        halted = runtime.start_instance(without, {})
        wait_for_status(halted, "halted", timeout=60)
        assert halted.halt_reason == "circuit_open"
        assert len(server.requests) == calls  # nothing reached the provider while open

        server.configure(status=200, reply="fine")
        from workflows.adapters.breakers import is_blocking

        if is_blocking("openai:m1"):  # still cooling down: nothing may be resumed yet
            assert review.resume_circuit_halts(operator) == 0
        wait_for(lambda: review.resume_circuit_halts(operator) == 1, 10, message="bulk resume after cool-down")
        wait_for_status(halted, "completed", timeout=60)
        assert halted.steps.get(node_id="ask").output["text"] == "fine"
        assert BreakerState.objects.get(key="openai:m1").state == "closed"
    finally:
        server.stop()


@pytest.mark.django_db(transaction=True)
def test_a_workflow_with_a_bad_model_name_does_not_open_the_breaker_for_others(processes, make_version):
    """The provider refuses one workflow's requests (HTTP 404, no such model): its steps fail, but the
    breaker it shares with every other undeclared model stays closed, and other workflows are served."""
    from tests.support.llm_server import LLMTestServer
    from workflows.adapters.breakers import state_of

    with LLMTestServer() as server:
        server.configure(model="no-such-model", status=404)
        broken = make_version(chain({"id": "ask", "type": "llm",
                                     "config": {"provider": "openai", "model": "no-such-model", "prompt": "hi"}}))
        fine = make_version(chain({"id": "ask", "type": "llm",
                                   "config": {"provider": "openai", "model": "other-model", "prompt": "hi"}}))
        env = {"STEADYFLOW_LLM_BASE_URL": server.url, "STEADYFLOW_BREAKER_MIN_CALLS": "3"}
        processes.worker("default", env=env)
        processes.worker("ai", env=env)
        processes.scheduler(env=env)
        failed = [runtime.start_instance(broken, {}) for _ in range(6)]
        for instance in failed:
            wait_for_status(instance, "failed", timeout=60)
            error = instance.steps.get(node_id="ask").error
            assert error["code"] == "provider_error" and error["permanent"] and error["status"] == 404
        assert state_of("openai:*") == "closed"
        served = runtime.start_instance(fine, {})
        wait_for_status(served, "completed", timeout=60)
        step = served.steps.get(node_id="ask")
        assert step.output["text"] == "ok" and not step.degraded
        assert [r["status"] for r in server.requests] == [404] * 6 + [200]


@pytest.mark.django_db(transaction=True)
def test_without_settings_a_long_chain_and_a_wide_fan_out_complete_while_a_loop_still_halts(processes):
    """The default limit covers one pass over every node (engine/activations.py): a graph with no
    loop never halts on its first run, however many nodes; a loop still halts at the default."""
    from workflows.authoring.definitions import save_version

    work = [{"id": f"n{i}", "type": "python", "config": {"function": "noop"}} for i in range(1, 16)]
    branches = [{"id": f"p{i}", "type": "python", "config": {"function": "noop"}} for i in range(1, 13)]
    fan = {"nodes": [{"id": "start", "type": "start"}, *branches, {"id": "end", "type": "end"}],
           "edges": [*({"source": "start", "target": b["id"]} for b in branches),
                     *({"source": b["id"], "target": "end"} for b in branches)]}
    call_command("load_examples")
    looping = dict(WorkflowDefinition.objects.get(slug="hallucination-loop").latest_version().graph)
    looping.pop("settings")
    _workers(processes)
    long_chain = runtime.start_instance(save_version("long-chain", chain(*work)), {})
    wide = runtime.start_instance(save_version("wide-fan-out", fan), {})
    loop = runtime.start_instance(save_version("loop-without-settings", looping), {"ticket": "T-8"})

    wait_for_status(long_chain, "completed", timeout=90)
    assert long_chain.max_transitions == long_chain.loop_count == 17  # start, 15 nodes, end
    wait_for_status(wide, "completed", timeout=90)
    assert wide.max_transitions == wide.loop_count == 14
    wait_for_status(loop, "halted", timeout=90)
    assert loop.halt_reason == "loop_breaker" and loop.max_transitions == loop.loop_count == 10
