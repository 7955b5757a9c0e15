"""The run report builder (workflows/operators/report.py): rows in, report out, in process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from workflows.operators.report import build_report

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def step(pk: int, node: str, *, visit: int = 1, attempt: int = 1, status: str = "succeeded", start: float = 0,
         end: float | None = 1, usage: dict[str, Any] | None = None, output: Any = None, node_type: str = "python",
         error: Any = None) -> dict[str, Any]:
    return {"id": pk, "node_id": node, "node_type": node_type, "visit": visit, "attempt": attempt, "status": status,
            "worker": "w", "created_at": at(start), "started_at": at(start),
            "finished_at": at(end) if end is not None else None, "usage": usage, "output": output, "error": error,
            "degraded": False}


INSTANCE = {"id": 9, "workflow": "wf", "version": 2, "status": "completed", "halt_reason": "",
            "created_at": at(0), "finished_at": at(10), "trace_id": "t", "tokens": 165,
            "cost_usd": Decimal("0.350000")}


def test_path_per_node_totals_retries_tokens_cost_and_tool_calls() -> None:
    usage = {"model": "m", "prompt_tokens": 100, "completion_tokens": 50, "cost_usd": 0.3}
    rows = [
        step(5, "ask", visit=2, start=5, end=6.5, node_type="llm",
             usage={"model": "m", "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.05},
             output={"text": "b", "tool_calls": [{"name": "x"}, {"name": "y"}]}),
        step(1, "start", node_type="start", end=0),
        step(2, "fetch", attempt=3, start=0.5, end=2.5),
        step(3, "ask", start=3, end=4, node_type="llm", usage=usage, output={"text": "a", "tool_calls": []}),
        step(4, "ask", visit=3, start=7, end=7.25, node_type="llm",
             usage={"model": "m", "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "cached": True},
             output={"text": "a", "cache": {"hit": True, "source_step": 3, "age_s": 4.0}}),
        step(6, "end", node_type="end", start=8, end=8),
    ]
    report = build_report(INSTANCE, rows)
    assert [(p["node"], p["visit"]) for p in report["path"]] == [
        ("start", 1), ("fetch", 1), ("ask", 1), ("ask", 3), ("ask", 2), ("end", 1)]
    nodes = {n["node"]: n for n in report["nodes"]}
    assert list(nodes) == ["start", "fetch", "ask", "end"]
    assert nodes["fetch"]["retries"] == 2 and nodes["fetch"]["attempts"] == 3
    assert nodes["fetch"]["duration_ms"] == 2000.0
    assert nodes["ask"]["visits"] == 3
    assert nodes["ask"]["duration_ms"] == 2750.0 and nodes["ask"]["max_duration_ms"] == 1500.0
    assert nodes["ask"]["tokens"] == 165 and nodes["ask"]["cost_usd"] == 0.35
    assert nodes["ask"]["tool_calls"] == 2 and nodes["ask"]["cache_hits"] == 1
    assert nodes["ask"]["statuses"] == {"succeeded": 3}
    hit = next(s for s in report["steps"] if s["id"] == 4)
    assert hit["cache"]["source_step"] == 3 and hit["cost_usd"] == 0.0
    totals = report["totals"]
    assert totals == {"steps": 6, "nodes": 4, "attempts": 8, "retries": 2, "step_duration_ms": 4750.0,
                      "wall_ms": 10000.0, "tokens": 165, "cost_usd": 0.35, "tool_calls": 2, "cache_hits": 1,
                      "halts": 0, "decisions": 0}


def test_unfinished_steps_halts_and_decisions() -> None:
    rows = [step(1, "start", node_type="start", end=0),
            step(2, "fetch", attempt=2, status="failed", end=1, error={"message": "boom", "kind": "x"}),
            step(3, "wait", attempt=0, status="pending", end=None)]
    reviews = [{"id": 7, "node_id": "fetch", "reason": "budget_exceeded", "status": "approved",
                "details": {"message": "over budget"}, "decision": {"action": "approve"}, "created_at": at(2),
                "decided_at": at(3), "decided_by": "olga", "note": "fine"}]
    audit = [{"id": 11, "action": "approve", "created_at": at(3), "actor": "olga", "review_id": 7, "note": "fine"}]
    running = {**INSTANCE, "status": "running", "finished_at": None, "tokens": 0, "cost_usd": None}
    report = build_report(running, rows, reviews, audit)
    steps = {s["id"]: s for s in report["steps"]}
    assert steps[2]["error"] == "boom" and steps[2]["retries"] == 1
    assert steps[3]["duration_ms"] is None and steps[3]["retries"] == 0
    assert report["halts"] == [{"id": 7, "node": "fetch", "reason": "budget_exceeded", "status": "approved",
                                "message": "over budget", "created_at": at(2), "decided_at": at(3),
                                "decided_by": "olga", "action": "approve", "note": "fine"}]
    assert report["audit"][0]["actor"] == "olga" and report["audit"][0]["review"] == 7
    assert report["totals"]["wall_ms"] is None and report["totals"]["cost_usd"] == 0.0
    assert report["totals"]["halts"] == 1 and report["totals"]["decisions"] == 1


def test_an_instance_with_no_steps() -> None:
    report = build_report(INSTANCE, [])
    assert report["path"] == [] and report["nodes"] == [] and report["totals"]["steps"] == 0
    assert report["truncated"] is False


def test_a_truncated_step_list_says_so() -> None:
    report = build_report(INSTANCE, [step(1, "start", node_type="start", end=0)], steps_total=50_000)
    assert report["truncated"] is True and report["totals"]["steps"] == 50_000 and len(report["steps"]) == 1
    assert report["totals"]["tokens"] == 165  # the instance's own counters, whatever was listed


def test_a_planner_or_sub_workflow_step_counts_the_same_tokens_in_the_report_as_in_the_inspector() -> None:
    """Issue 22: the step inspector showed 1112 tokens for a planner step (its usage records the child's
    total as `tokens`, no in/out split) and the run report 0. One function counts a step's tokens for both
    (workflows/engine/usage.py), and for the instance's running total."""
    from types import SimpleNamespace

    from dashboard.api.shapes import step_json
    from workflows.engine.usage import has_split, step_tokens

    planner_usage = {"tokens": 1112, "cost_usd": 0.01, "model": "planner:scripted", "child": 12}
    llm_usage = {"model": "m", "prompt_tokens": 100, "completion_tokens": 50, "cost_usd": 0.3}
    rows = [step(1, "plan", node_type="planner", usage=planner_usage), step(2, "ask", node_type="llm", usage=llm_usage)]
    report = build_report({**INSTANCE, "tokens": 1262}, rows)
    by_node = {s["node"]: s["tokens"] for s in report["steps"]}
    assert by_node == {"plan": 1112, "ask": 150}
    assert sum(n["tokens"] for n in report["nodes"]) == report["totals"]["tokens"] == 1262
    for usage, split in ((planner_usage, False), (llm_usage, True)):
        fake = SimpleNamespace(usage=usage, pk=1, node_id="n", node_type="t", visit=1, attempt=1, status="succeeded",
                               queue="default", worker="", created_at=None, started_at=None, finished_at=None,
                               due_at=None, duration_s=None, input={}, output={}, error=None, idempotency_key="k",
                               degraded=False)
        shown = step_json(fake)  # type: ignore[arg-type]  # the fields step_json reads
        assert shown["tokens"] == step_tokens(usage) and shown["tokens_split"] is split
    assert step_tokens(None) == 0 and not has_split({"tokens": 3})
