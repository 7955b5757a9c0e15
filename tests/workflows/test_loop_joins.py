"""A join inside a loop body on real workers: an agent round calls two tools in parallel (on two
queues, so two worker processes) and joins them; the join runs once per round, after that round's
branches, and a tool not called in one round is skipped for that round only."""

from __future__ import annotations

import itertools
import os
import signal
from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.* functions in this process
from tests.conftest import wait_for
from tests.workflows.support import assert_history_consistent, edge, events, expect_status, py, steps
from workflows import runtime
from workflows.authoring.definitions import save_version

pytestmark = pytest.mark.django_db(transaction=True)

_slugs = itertools.count(1)


@pytest.fixture
def worker_env(worker_env: dict[str, str]) -> dict[str, str]:
    worker_env.update(tests.workflows.functions.EXTRA_FUNCTIONS_ENV)
    return worker_env


AGENT_ROUNDS: dict[str, Any] = {
    "nodes": [
        {"id": "start", "type": "start"},
        {"id": "think", "type": "router", "config": {"rules": [{"when": "context.n < 3", "route": "tools"}],
                                                     "default": "answer"}},
        py("tool_a", "tests.echo", args={"tool": "a", "round": "{{ context.n }}"}),
        py("tool_b", "tests.echo", args={"tool": "b", "round": "{{ context.n }}"}, queue="io"),
        py("merge", "tests.collect", args={"nodes": ["tool_a", "tool_b"]}),
        py("count", "tests.echo", args={"set": {"n": "{{ context.n + 1 }}"}}),
        py("answer", "tests.echo", args={"answered": True}),
        {"id": "end", "type": "end"},
    ],
    "edges": [
        edge("start", "think"),
        edge("think", "tool_a", "route == 'tools'"),
        edge("think", "tool_b", "route == 'tools' and context.n != 1"),  # not called in round 2
        edge("tool_a", "merge"), edge("tool_b", "merge"),
        edge("merge", "count"), edge("count", "think"),
        edge("think", "answer", "route == 'answer'"), edge("answer", "end"),
    ],
    "settings": {"max_transitions": 30},
}


def test_parallel_tools_joined_inside_an_agent_loop_run_to_the_end(processes, redis_conn):
    instance = runtime.start_instance(save_version(f"loop-join-{next(_slugs)}", AGENT_ROUNDS), {"n": 0})
    processes.worker("default")
    processes.worker("io")

    expect_status(instance, "completed")
    counts = {node: len(steps(instance, node)) for node in ("think", "tool_a", "tool_b", "merge", "count",
                                                             "answer", "end")}
    assert counts == {"think": 4, "tool_a": 3, "tool_b": 2, "merge": 3, "count": 3, "answer": 1, "end": 1}
    assert all(s.status == "succeeded" for s in steps(instance))
    # Each round's join ran once, after that round's tools, and saw this round's outputs.
    merges = steps(instance, "merge")
    rounds_a = [s.output["outputs"][0]["output"]["round"] for s in merges]
    assert rounds_a == [0, 1, 2]
    assert [s.output["outputs"][1]["output"]["round"] for s in (merges[0], merges[2])] == [0, 2]
    log = events(instance)
    seq_of = {(e.node_id, e.step_id): e.seq for e in log if e.type == "step_succeeded"}
    for merge, a in zip(merges, steps(instance, "tool_a"), strict=True):
        started = min(e.seq for e in log if e.step_id == merge.id)
        assert started > seq_of[("tool_a", a.id)]
    for merge, b in zip((merges[0], merges[2]), steps(instance, "tool_b"), strict=True):
        assert min(e.seq for e in log if e.step_id == merge.id) > seq_of[("tool_b", b.id)]
    # The tool not called in round 2 was skipped then (its input to the join resolved as not fired),
    # and called again in round 3.
    assert [e.node_id for e in events(instance, "node_skipped")] == ["tool_b"]
    instance.refresh_from_db()
    assert instance.state["joins"] == {}
    assert instance.context["n"] == 3
    assert_history_consistent(instance)


def test_a_join_record_inside_a_loop_survives_the_workers_being_killed(processes, redis_conn):
    """Round 1's tool_a has committed its input to the join; then the only worker is SIGKILLed. Fresh
    workers read the join's record from the committed instance state: the round's join runs once
    with both tools and the loop goes on to its end."""
    instance = runtime.start_instance(save_version(f"loop-join-{next(_slugs)}", AGENT_ROUNDS), {"n": 0})
    first = processes.worker("default")  # no io worker yet: tool_b of round 1 stays queued
    wait_for(lambda: instance.steps.filter(node_id="tool_a", status="succeeded").exists(),
             message="round 1's tool_a to succeed")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    instance.refresh_from_db()
    assert instance.state["joins"] == {"merge": {"edges": {"3": True}, "started": False}}
    assert steps(instance, "merge") == []

    processes.worker("default")
    processes.worker("io")
    expect_status(instance, "completed")
    counts = {node: len(steps(instance, node)) for node in ("think", "tool_a", "tool_b", "merge", "count")}
    assert counts == {"think": 4, "tool_a": 3, "tool_b": 2, "merge": 3, "count": 3}
    assert steps(instance, "merge")[0].output["seen"] == ["tool_a", "tool_b"]
    assert_history_consistent(instance)
