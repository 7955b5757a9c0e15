"""The engine end to end: real worker processes (burst and long-running) and a real scheduler against
real Redis and the database.

The graphs built here use python, router and wait nodes; the shipped examples (at the end) add LLM
nodes with the scripted provider, served by an `ai` worker (`--sync` when STEADYFLOW_TEST_AI_SYNC is
set, see conftest) and HTTP nodes calling a server this test starts on 127.0.0.1."""

from __future__ import annotations

import io
import itertools
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command

import tests.workflows.functions  # noqa: F401 - registers tests.* functions in this process
from tests.conftest import chain, wait_for, wait_for_status
from tests.workflows.functions import EXTRA_FUNCTIONS_ENV, calls_so_far
from tests.workflows.support import (
    assert_history_consistent,
    edge,
    event_types,
    events,
    expect_status,
    path,
    py,
    steps,
    wait_for_workers,
)
from workflows import runtime
from workflows.authoring.definitions import save_version, split_document
from workflows.engine.errors import GraphInvalid
from workflows.models import WorkflowDefinition
from workflows.runtime.observe import step_span_id

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker_env(worker_env: dict[str, str]) -> dict[str, str]:
    """conftest's worker environment, plus this suite's python functions in every worker."""
    worker_env.update(EXTRA_FUNCTIONS_ENV)
    return worker_env


_slugs = itertools.count(1)


def start(graph: dict[str, Any], start_input: dict[str, Any] | None = None) -> Any:
    version = save_version(f"exec-{next(_slugs)}", graph)
    return runtime.start_instance(version, start_input or {})


def run_burst(processes: Any, *queues: str, env: dict[str, str] | None = None) -> None:
    """A burst worker drains the queues and exits; its exit code must be 0."""
    proc = processes.worker(*queues, burst=True, env=env)
    assert proc.wait(timeout=60) == 0, processes.logs()


# --- Chains and inline continuation ------------------------------------------------------------------

def test_chain_runs_in_order_in_one_job_on_a_burst_worker(processes, redis_conn):
    import django_rq

    instance = start(chain(py("a"), py("b"), py("c")), {"order": []})
    # Only the first step is on the queue: its successors do not exist yet.
    assert django_rq.get_queue("default").count == 1
    run_burst(processes, "default")

    expect_status(instance, "completed", timeout=5)
    assert instance.context["order"] == ["a", "b", "c"]
    assert path(instance) == ["start", "a", "b", "c", "end"]
    assert_history_consistent(instance)
    # Inline continuation: b and c were claimed by the worker that finished their predecessor, in the
    # same job, so they were never queued; one job ran the whole chain.
    assert [e.node_id for e in events(instance, "step_queued")] == ["a"]
    runs = steps(instance)
    assert len({s.worker for s in runs if s.node_type == "python"}) == 1
    assert {s.output["pid"] for s in runs if s.node_type == "python"} == {runs[1].output["pid"]}
    for node in ("b", "c"):
        assert event_types(instance, node) == ["step_started", "step_succeeded"]
    assert event_types(instance, "a") == ["step_queued", "step_started", "step_succeeded"]
    # Each step's fired edge rides on its step_succeeded event (no edges_taken row).
    assert all(e.payload.get("edges") == [1] for e in events(instance, "step_succeeded") if e.node_id == "a")
    # Every step was one attempt, and its output saw its own idempotency key.
    assert all(s.attempt == 1 and s.status == "succeeded" for s in runs)
    assert [s.output["key"] for s in runs if s.node_type == "python"] == [
        f"{instance.pk}:{n}:1" for n in ("a", "b", "c")]
    # One state delta per committed step (a, b, c), each holding the key it changed as of that step,
    # and one snapshot, at the end (docs/DESIGN.md "State: deltas and snapshots").
    deltas = list(instance.deltas.order_by("seq"))
    assert [d.delta["set"]["order"] for d in deltas] == [["a"], ["a", "b"], ["a", "b", "c"]]
    assert all(d.verifies() for d in deltas)
    checkpoints = list(instance.checkpoints.order_by("seq"))
    assert [c.state["context"]["order"] for c in checkpoints] == [["a", "b", "c"]]
    assert all(c.verifies() for c in checkpoints)
    assert django_rq.get_queue("default").count == 0


def test_successor_on_another_queue_is_enqueued_not_run_inline(processes, redis_conn):
    instance = start(chain(py("a"), py("b", queue="io"), py("c")), {"order": []})
    processes.worker("default")
    processes.worker("io")

    expect_status(instance, "completed")
    assert instance.context["order"] == ["a", "b", "c"]
    assert [e.node_id for e in events(instance, "step_queued")] == ["a", "b", "c"]
    queues = {s.node_id: s.queue for s in steps(instance)}
    assert (queues["a"], queues["b"], queues["c"]) == ("default", "io", "default")
    workers = {s.node_id: s.worker for s in steps(instance)}
    assert workers["b"] != workers["a"] == workers["c"]
    assert_history_consistent(instance)


def test_inline_continuation_can_be_turned_off(processes, redis_conn):
    instance = start(chain(py("a"), py("b"), py("c")), {"order": []})
    run_burst(processes, "default", env={"STEADYFLOW_INLINE_CONTINUATION": "0"})

    expect_status(instance, "completed", timeout=5)
    assert instance.context["order"] == ["a", "b", "c"]
    # Each step went through the queue as its own job.
    assert [e.node_id for e in events(instance, "step_queued")] == ["a", "b", "c"]
    assert_history_consistent(instance)


# --- Fan-out, joins, conditions ---------------------------------------------------------------------

def test_fan_out_and_join_all_runs_the_join_once_after_every_branch(processes, redis_conn):
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            py("split"),
            py("b1", "tests.echo", args={"branch": 1}),
            py("b2", "tests.echo", args={"branch": 2}, queue="io"),
            py("b3", "tests.echo", args={"branch": 3}),
            py("join", "tests.collect", args={"nodes": ["b1", "b2", "b3"]}),
            {"id": "end", "type": "end"},
        ],
        "edges": [edge("start", "split"), edge("split", "b1"), edge("split", "b2"), edge("split", "b3"),
                  edge("b1", "join"), edge("b2", "join"), edge("b3", "join"), edge("join", "end")],
    }
    instance = start(graph)
    processes.worker("default")
    processes.worker("default")

    # The default-queue branches finish; the io branch waits for its worker, and so does the join.
    wait_for(lambda: instance.steps.filter(node_id__in=("b1", "b3"), status="succeeded").count() == 2,
             message="b1 and b3 to succeed")
    (b2,) = steps(instance, "b2")
    assert b2.status == "queued"
    assert steps(instance, "join") == []
    instance.refresh_from_db()
    # The join remembers which incoming edges have resolved so far.
    assert instance.state["joins"]["join"]["edges"] == {"4": True, "6": True}

    processes.worker("io")
    expect_status(instance, "completed")
    (join,) = steps(instance, "join")
    assert join.output["seen"] == ["b1", "b2", "b3"]
    # The join activated only after the last branch committed.
    log = events(instance)
    last_branch = max(e.seq for e in log if e.type == "step_succeeded" and e.node_id in ("b1", "b2", "b3"))
    assert min(e.seq for e in log if e.node_id == "join") > last_branch
    # Several successors: each branch was queued as its own job, none ran inline.
    assert {e.node_id for e in events(instance, "step_queued")} >= {"b1", "b2", "b3"}
    assert instance.state["joins"] == {}
    assert_history_consistent(instance)


def test_join_any_starts_on_the_first_branch_and_runs_once(processes, redis_conn):
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            py("fast", "tests.echo", args={"who": "fast"}),
            py("slow", "tests.echo", args={"who": "slow"}, queue="io"),
            py("first", "tests.collect", args={"nodes": ["fast", "slow"]}, join="any"),
            {"id": "end", "type": "end"},
        ],
        "edges": [edge("start", "fast"), edge("start", "slow"), edge("fast", "first"), edge("slow", "first"),
                  edge("first", "end")],
    }
    instance = start(graph)
    processes.worker("default")

    # The join starts on the first branch and reaches the end, but the instance stays open while
    # the other branch has not run.
    wait_for(lambda: [s for s in steps(instance, "end")], message="the end node")
    (first,) = steps(instance, "first")
    assert first.output["seen"] == ["fast"]
    instance.refresh_from_db()
    assert instance.status == "running" and instance.open_steps == 1

    processes.worker("io")
    expect_status(instance, "completed")
    (slow,) = steps(instance, "slow")
    assert slow.status == "succeeded"
    assert len(steps(instance, "first")) == 1
    assert instance.state["joins"] == {}
    assert_history_consistent(instance)


def test_branch_not_taken_does_not_block_the_join(processes, redis_conn):
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            py("decide", "tests.echo", args={"route": "{{ input.route }}"}),
            py("left", "tests.echo", args={"side": "left"}),
            py("right", "tests.echo", args={"side": "right"}),
            py("after_right", "tests.echo", args={"side": "after right"}),
            py("join", "tests.collect", args={"nodes": ["left", "right", "after_right"]}),
            {"id": "end", "type": "end"},
        ],
        "edges": [edge("start", "decide"), edge("decide", "left", "route == 'left'"),
                  edge("decide", "right", "route == 'right'"), edge("right", "after_right"),
                  edge("left", "join"), edge("after_right", "join"), edge("join", "end")],
    }
    version = save_version("dead-path", graph)
    left = runtime.start_instance(version, {"route": "left"})
    right = runtime.start_instance(version, {"route": "right"})
    processes.worker("default")

    expect_status(left, "completed")
    expect_status(right, "completed")
    assert path(left) == ["start", "decide", "left", "join", "end"]
    assert steps(left, "join")[0].output["seen"] == ["left"]
    # The skipped branch is eliminated down to the join, and says so in the log.
    assert [e.node_id for e in events(left, "node_skipped")] == ["right", "after_right"]
    assert path(right) == ["start", "decide", "right", "after_right", "join", "end"]
    assert steps(right, "join")[0].output["seen"] == ["right", "after_right"]
    assert [e.node_id for e in events(right, "node_skipped")] == ["left"]
    for instance in (left, right):
        assert_history_consistent(instance)


def test_join_behind_a_loop_exit_waits_for_the_loop_to_leave(processes, redis_conn):
    """A loop exit not taken on one round is not a dead path: the join after it waits for the round
    that leaves the loop (a join-all here once started early with only `side`)."""
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            py("side", "tests.echo", args={"side": True}),
            {"id": "think", "type": "router", "config": {"rules": [{"when": "context.n < 1", "route": "tool"}],
                                                         "default": "answer"}},
            py("tool", "tests.echo", args={"set": {"n": "{{ context.n + 1 }}"}}),
            py("answer", "tests.echo", args={"answered": True}),
            py("fin", "tests.collect", args={"nodes": ["side", "answer"]}),
            {"id": "end", "type": "end"},
        ],
        "edges": [edge("start", "side"), edge("start", "think"), edge("think", "tool", "route == 'tool'"),
                  edge("tool", "think"), edge("think", "answer", "route == 'answer'"), edge("answer", "fin"),
                  edge("side", "fin"), edge("fin", "end")],
    }
    instance = start(graph, {"n": 0})
    processes.worker("default")

    expect_status(instance, "completed")
    assert [s.output["seen"] for s in steps(instance, "fin")] == [["side", "answer"]]
    assert [s.visit for s in steps(instance, "think")] == [1, 2]
    assert "answer" not in [e.node_id for e in events(instance, "node_skipped")]
    assert_history_consistent(instance)


def test_conditional_edges_route_on_output_and_context(processes, redis_conn):
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            py("score", "tests.echo", args={"score": "{{ input.score }}", "set": {"tier": "{{ input.tier }}"}}),
            py("high", "tests.echo", args={"band": "high"}),
            py("low", "tests.echo", args={"band": "low"}),
            py("gold", "tests.echo", args={"band": "gold"}),
            {"id": "end", "type": "end", },
        ],
        "edges": [edge("start", "score"),
                  edge("score", "high", "score >= 5 and context.tier != 'gold'"),
                  edge("score", "low", "score < 5"),
                  edge("score", "gold", "context.tier == 'gold' and score >= 5"),
                  edge("high", "end"), edge("low", "end"), edge("gold", "end")],
    }
    version = save_version("conditions", graph)
    cases = {"high": {"score": 7, "tier": "silver"}, "low": {"score": 2, "tier": "gold"},
             "gold": {"score": 9, "tier": "gold"}}
    instances = {name: runtime.start_instance(version, data) for name, data in cases.items()}
    processes.worker("default")

    for name, instance in instances.items():
        expect_status(instance, "completed")
        assert path(instance) == ["start", "score", name, "end"], name
        # A template that is exactly one placeholder keeps the value's type.
        assert steps(instance, "score")[0].output["score"] == cases[name]["score"]
        assert_history_consistent(instance)


def test_router_node_picks_the_route(processes, redis_conn):
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "triage", "type": "router", "config": {
                "rules": [{"when": "context.amount > 1000", "route": "manual"},
                          {"when": "context.vip", "route": "fast"}],
                "default": "normal"}},
            py("manual", "tests.echo", args={"lane": "manual"}),
            py("fast", "tests.echo", args={"lane": "fast"}),
            py("normal", "tests.echo", args={"lane": "normal"}),
            {"id": "end", "type": "end"},
        ],
        "edges": [edge("start", "triage"),
                  edge("triage", "manual", "route == 'manual'"),
                  edge("triage", "fast", "route == 'fast'"),
                  edge("triage", "normal", "route == 'normal'"),
                  edge("manual", "end"), edge("fast", "end"), edge("normal", "end")],
    }
    version = save_version("router", graph)
    cases = {"manual": {"amount": 5000, "vip": True}, "fast": {"amount": 10, "vip": True},
             "normal": {"amount": 10, "vip": False}}
    instances = {name: runtime.start_instance(version, data) for name, data in cases.items()}
    processes.worker("default")

    for name, instance in instances.items():
        expect_status(instance, "completed")
        assert steps(instance, "triage")[0].output == {"route": name}
        assert path(instance) == ["start", "triage", name, "end"]
        assert_history_consistent(instance)


def test_dead_end_fails_and_names_the_node(processes, redis_conn):
    graph = {
        "nodes": [
            {"id": "start", "type": "start"},
            py("gate", "tests.echo", args={"score": "{{ input.score }}"}),
            py("pass_", "tests.echo"),
            {"id": "end", "type": "end"},
        ],
        "edges": [edge("start", "gate"), edge("gate", "pass_", "score > 5"), edge("gate", "end", "score < 0"),
                  edge("pass_", "end")],
    }
    instance = start(graph, {"score": 3})
    run_burst(processes, "default")

    expect_status(instance, "failed", timeout=5)
    assert instance.halt_reason == "dead_end"
    assert instance.error["node"] == "gate"
    assert "node 'gate'" in instance.error["message"]
    assert events(instance)[-1].type == "instance_failed"
    assert_history_consistent(instance)


# --- Retries, timeouts ------------------------------------------------------------------------------

def test_retries_back_off_and_permanent_errors_are_not_retried(processes, redis_conn):
    no_jitter = {"backoff_s": 0.2, "jitter": False}
    flaky = save_version("flaky", chain(py("flaky", "tests.fail_times", args={"failures": 3},
                                           retry={"max_attempts": 5, **no_jitter})))
    capped = save_version("capped", chain(py("capped", "tests.fail_times", args={"failures": 2},
                                             retry={"max_attempts": 3, "max_backoff_s": 0.3, **no_jitter})))
    buggy = save_version("buggy", chain(py("buggy", "tests.fail_times",
                                           args={"failures": 1, "exception": "ValueError"},
                                           retry={"max_attempts": 2, **no_jitter})))
    permanent = save_version("permanent", chain(py("perm", "tests.fail_times",
                                                   args={"failures": 5, "permanent": True},
                                                   retry={"max_attempts": 5, **no_jitter})))
    exhausted = save_version("exhausted", chain(py("tired", "tests.fail_times", args={"failures": 9},
                                                   retry={"max_attempts": 2, **no_jitter})))
    runs = {name: runtime.start_instance(v, {}) for name, v in
            [("flaky", flaky), ("capped", capped), ("buggy", buggy), ("permanent", permanent),
             ("exhausted", exhausted)]}
    processes.worker("default")
    processes.scheduler()

    inst = expect_status(runs["flaky"], "completed")
    (step,) = steps(inst, "flaky")
    assert step.attempt == 4 and step.output == {"calls": 4, "attempt": 4}
    assert calls_so_far(step.idempotency_key) == 4
    retrying = events(inst, "step_retrying")
    assert [e.payload["attempt"] for e in retrying] == [1, 2, 3]
    assert [e.payload["retry_in_s"] for e in retrying] == [0.2, 0.4, 0.8]
    assert retrying[0].payload["error"]["message"] == "planned failure 1 of 3"
    # A retry does not start before its backoff has passed.
    starts = events(inst, "step_started")
    assert len(starts) == 4
    for before, after in zip(retrying, starts[1:], strict=True):
        assert after.created_at >= before.created_at + timedelta(seconds=before.payload["retry_in_s"])
    assert_history_consistent(inst)

    inst = expect_status(runs["capped"], "completed")
    assert [e.payload["retry_in_s"] for e in events(inst, "step_retrying")] == [0.2, 0.3]

    # An unexpected exception from a function is transient: retried like any other failure.
    inst = expect_status(runs["buggy"], "completed")
    (retry,) = events(inst, "step_retrying")
    assert retry.payload["error"]["message"] == "ValueError: planned failure 1 of 1"
    assert retry.payload["error"]["exception"] == "ValueError"

    inst = expect_status(runs["permanent"], "failed")
    (step,) = steps(inst, "perm")
    assert step.attempt == 1 and step.status == "failed"
    assert calls_so_far(step.idempotency_key) == 1
    assert events(inst, "step_retrying") == []
    assert step.error["permanent"] is True
    assert inst.halt_reason == "step_failed"
    assert inst.error["node"] == "perm"
    assert inst.error["message"] == "step 'perm' failed: planned failure 1 of 5"
    assert_history_consistent(inst)

    inst = expect_status(runs["exhausted"], "failed")
    (step,) = steps(inst, "tired")
    assert step.attempt == 2 and calls_so_far(step.idempotency_key) == 2
    assert len(events(inst, "step_retrying")) == 1
    assert events(inst, "step_failed")[0].payload["error"]["message"] == "planned failure 2 of 9"
    assert steps(inst, "end") == []
    assert_history_consistent(inst)


def test_step_timeout_is_retried_then_fails(processes, redis_conn):
    graph = chain(py("slow", "tests.sleep", args={"seconds": 30}, timeout_s=0.5,
                     retry={"max_attempts": 2, "backoff_s": 0.1}))
    instance = start(graph)
    processes.worker("default")
    processes.scheduler()

    expect_status(instance, "failed", timeout=30)
    (step,) = steps(instance, "slow")
    assert step.attempt == 2
    assert calls_so_far(step.idempotency_key) == 2
    (retry,) = events(instance, "step_retrying")
    assert retry.payload["error"]["code"] == "timeout"
    assert step.error["code"] == "timeout"
    assert step.error["message"] == "step slow exceeded its timeout of 0.5 s"
    assert instance.halt_reason == "step_failed"
    assert_history_consistent(instance)


# --- Timers and TTL ---------------------------------------------------------------------------------

def test_wait_node_completes_after_its_delay_via_the_scheduler(processes, redis_conn):
    # The timer follows a python step on the same queue, so the worker runs it inline the moment it is
    # activated: it sleeps, whatever the machine's load, and only the scheduler can wake it.
    instance = start(chain(py("before"), {"id": "pause", "type": "wait", "config": {"seconds": 1}}, py("after")))
    processes.worker("default")
    processes.scheduler()

    expect_status(instance, "completed")
    (pause,) = steps(instance, "pause")
    kinds = event_types(instance, "pause")
    assert kinds == ["step_started", "step_waiting", "step_started", "step_succeeded"]
    # Sleeping is not an attempt: the timer ran once more when due, and that is attempt 1.
    assert pause.attempt == 1
    waiting = events(instance, "step_waiting")[0]
    assert waiting.payload["until"] == (pause.created_at + timedelta(seconds=1)).isoformat()
    woke = events(instance, "step_started", node="pause")[1]
    assert woke.created_at >= pause.created_at + timedelta(seconds=1)
    assert pause.output == {"waited_until": waiting.payload["until"]}
    assert instance.context["order"] == ["before", "after"]
    assert_history_consistent(instance)


@pytest.mark.parametrize("action", ["fail", "halt"])
def test_ttl_expiry_stops_an_instance_while_a_timer_sleeps(processes, redis_conn, action):
    from workflows.models import ReviewItem

    graph = chain({"id": "pause", "type": "wait", "config": {"seconds": 600}}, py("never"),
                  settings={"ttl_s": 2})
    env = {"STEADYFLOW_TTL_ACTION": action}
    processes.worker("default", env=env)
    processes.scheduler(env=env)
    # The worker must be listening before the 2-second TTL starts, or the timer never gets to sleep.
    wait_for_workers(1)
    instance = start(graph)

    wait_for(lambda: events(instance, "step_waiting"), message="the timer to sleep")
    (pause,) = steps(instance, "pause")
    if action == "fail":
        expect_status(instance, "failed", timeout=15)
        pause.refresh_from_db()
        assert pause.status == "cancelled"
        assert [e.type for e in events(instance)][-2:] == ["step_cancelled", "instance_failed"]
        assert not ReviewItem.objects.filter(instance=instance).exists()
    else:
        # The default: halt into the review queue, keeping the sleeping timer for a resume.
        expect_status(instance, "halted", timeout=15)
        pause.refresh_from_db()
        assert pause.status == "pending"
        (review,) = ReviewItem.objects.filter(instance=instance)
        assert review.reason == "ttl_expired" and review.status == "open"
        assert events(instance)[-1].type == "instance_halted"
    assert instance.halt_reason == "ttl_expired"
    assert instance.error["message"].startswith("the instance passed its deadline")
    assert steps(instance, "never") == []
    assert_history_consistent(instance)


# --- Bad graphs -------------------------------------------------------------------------------------

BAD_GRAPHS = {
    "unknown type": (chain({"id": "mystery", "type": "teleport"}), "mystery", "unknown node type 'teleport'"),
    "unregistered function": (chain(py("calc", "nowhere.missing")), "calc",
                              "function 'nowhere.missing' is not registered"),
    "config schema": (chain({"id": "fetch", "type": "http", "config": {"method": "GET"}}), "fetch",
                      "'url' is a required property"),
    "bad template": (chain(py("tpl", "tests.echo", args={"x": "{{ context. }}"})), "tpl", "template"),
    "bad retry": (chain(py("r", "tests.echo", retry={"max_attempts": 0})), "r", "max_attempts"),
    "unconditional cycle": ({
        "nodes": [{"id": "start", "type": "start"}, py("ping"), py("pong"), {"id": "end", "type": "end"}],
        "edges": [edge("start", "ping"), edge("ping", "pong"), edge("pong", "ping"), edge("pong", "end")],
    }, "ping", "unconditional cycle ping -> pong -> ping"),
    "unreachable": ({
        "nodes": [{"id": "start", "type": "start"}, py("island"), {"id": "end", "type": "end"}],
        "edges": [edge("start", "end"), edge("island", "end")],
    }, "island", "node 'island' is unreachable from the start node"),
    "no way out": ({
        "nodes": [{"id": "start", "type": "start"}, py("sink"), {"id": "end", "type": "end"}],
        "edges": [edge("start", "sink"), edge("start", "end")],
    }, "sink", "node 'sink' has no outgoing edge"),
    "duplicate id": ({
        "nodes": [{"id": "start", "type": "start"}, py("twin"), py("twin"), {"id": "end", "type": "end"}],
        "edges": [edge("start", "twin"), edge("twin", "end")],
    }, "twin", "node 'twin': duplicate id"),
}


@pytest.mark.django_db  # no workers: the faster non-transactional database suffices
@pytest.mark.parametrize("case", sorted(BAD_GRAPHS))
def test_save_version_rejects_bad_graphs_naming_the_node(case):
    graph, node, text = BAD_GRAPHS[case]
    with pytest.raises(GraphInvalid) as caught:
        save_version("bad-graph", graph)
    issues = caught.value.issues
    assert any(issue.node == node and text in issue.message for issue in issues), issues
    assert not WorkflowDefinition.objects.filter(slug="bad-graph").exists()


@pytest.mark.django_db
def test_save_version_rejects_graph_level_problems():
    cases = [
        ({"nodes": [py("a"), {"id": "end", "type": "end"}], "edges": [edge("a", "end")]},
         "exactly one start node (found none)"),
        ({"nodes": [{"id": "start", "type": "start"}, py("a")], "edges": [edge("start", "a")]},
         "at least one end node"),
        (chain(py("a")) | {"edges": [edge("start", "a"), edge("a", "ghost")]},
         "target 'ghost' is not a node"),
        (chain(py("a")) | {"edges": [edge("start", "a"), edge("a", "end", "route ==")]}, "does not parse"),
        ({"nodes": []}, "'nodes' must be a non-empty list"),
    ]
    for graph, text in cases:
        with pytest.raises(GraphInvalid) as caught:
            save_version("bad-graph", graph)
        assert any(text in issue.message for issue in caught.value.issues), (text, caught.value.issues)
    with pytest.raises(GraphInvalid, match="slug 'Not A Slug' is not valid"):
        save_version("Not A Slug", chain(py("a")))


# --- The shipped examples ---------------------------------------------------------------------------

class _Research(BaseHTTPRequestHandler):
    """The research API the industry-report example calls (`context.research_base`)."""

    requests: list[dict[str, Any]] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        url = urlsplit(self.path)
        type(self).requests.append({"path": url.path, "query": parse_qs(url.query),
                                    "headers": {k.lower(): v for k, v in self.headers.items()}})
        body = json.dumps({"kind": url.path.strip("/"), "items": [f"{url.path.strip('/')} item"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def research_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("Research", (_Research,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests
    server.shutdown()
    server.server_close()


def example(slug: str) -> Any:
    return WorkflowDefinition.objects.get(slug=slug).latest_version()


def test_industry_report_fans_out_to_http_and_llm_and_completes(processes, worker_env, redis_conn,
                                                                research_server):
    base, requests = research_server
    worker_env["STEADYFLOW_HTTP_ALLOWLIST"] = "127.0.0.1"
    call_command("load_examples", stdout=io.StringIO())
    processes.all_workers()
    instance = runtime.start_instance(example("industry-report"), {"topic": "robots", "research_base": base})

    expect_status(instance, "completed", timeout=60)
    order = path(instance)
    assert order[:2] == ["start", "plan"]
    assert sorted(order[2:5]) == ["competitors", "market", "news"]
    assert order[5:] == ["clean", "compare", "write", "done"]
    (clean,) = steps(instance, "clean")
    assert clean.output["count"] == 3
    sources = {s["source"]: s["content"] for s in instance.context["sources"]}
    assert sources["market"] == {"kind": "market", "items": ["market item"]}
    assert sources["news"] == {"kind": "news", "items": ["news item"]}
    assert sources["competitors"] == "A, B, C"
    assert steps(instance, "write")[0].output["text"].startswith("## Report")
    # The HTTP nodes passed on their step's idempotency key and the instance's trace, with the
    # step's own span as the parent (workflows/runtime/observe.py).
    by_path = {r["path"]: r for r in requests}
    assert set(by_path) == {"/market", "/news"}
    for node in ("market", "news"):
        headers = by_path[f"/{node}"]["headers"]
        assert headers["idempotency-key"] == f"{instance.pk}:{node}:1"
        (step,) = steps(instance, node)
        assert headers["traceparent"] == f"00-{instance.trace_id.split('-')[1]}-{step_span_id(step.pk, 1)}-01"
        assert by_path[f"/{node}"]["query"] == {"q": ["robots"]}
    queues = {s.node_id: s.queue for s in steps(instance)}
    assert queues["market"] == queues["news"] == "io" and queues["plan"] == "ai"
    assert_history_consistent(instance)


def test_react_agent_loops_through_its_tool_and_completes(processes, redis_conn):
    call_command("load_examples", stdout=io.StringIO())
    processes.all_workers()
    instance = runtime.start_instance(example("react-agent"), {"question": "where is order 42?"})

    expect_status(instance, "completed", timeout=60)
    assert path(instance) == ["start", "intent", "think", "lookup", "think", "answer", "filter", "done"]
    assert [s.visit for s in steps(instance, "think")] == [1, 2]
    assert instance.context["reply"] == "Your order ships tomorrow."
    assert instance.context["observations"] == [{"tool": "orders", "order": 42, "status": "shipping tomorrow"}]
    # The branch the intent did not take is a dead path; the loop's exit to `answer` is not.
    assert [e.node_id for e in events(instance, "node_skipped")] == ["smalltalk"]
    assert steps(instance, "smalltalk") == []
    assert instance.loop_count == 8
    assert_history_consistent(instance)


def test_hallucination_loop_is_stopped_by_the_loop_breaker(processes, redis_conn):
    from workflows.models import ReviewItem

    call_command("load_examples", stdout=io.StringIO())
    processes.all_workers()
    instance = runtime.start_instance(example("hallucination-loop"), {"ticket": "T-1"})

    wait_for_status(instance, {"halted", "failed"}, timeout=60)
    assert instance.halt_reason == "loop_breaker"
    # Exactly max_transitions (10) activations ran: start and nine LLM steps; the eleventh was refused.
    assert instance.loop_count == 10
    assert len(steps(instance)) == 10
    assert path(instance) == ["start"] + ["node_a", "node_b"] * 4 + ["node_a"]
    assert instance.error["next"] == ["node_b"]
    assert instance.error["path"][-2:] == ["node_b", "node_a"]
    if instance.status == "halted":
        (review,) = ReviewItem.objects.filter(instance=instance)
        assert review.reason == "loop_breaker"
    assert_history_consistent(instance)


@pytest.mark.django_db
def test_refund_saga_loads_and_validates():
    from workflows.engine.validation import validate_graph
    from workflows.examples import example_files, load_example

    out = io.StringIO()
    call_command("load_examples", stdout=out)
    assert "refund-saga v1" in out.getvalue().splitlines()
    document = next(load_example(p) for p in example_files() if load_example(p)["slug"] == "refund-saga")
    graph, _ = split_document(document)
    assert validate_graph(graph) == []
    assert example("refund-saga").graph == graph
