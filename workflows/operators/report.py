"""An instance's run report: the path it took, time, retries, tokens and cost per step and per node,
tool calls, halts and the decisions on them, and totals.

A pure function of rows (dicts as `QuerySet.values()` gives them): no database here, so it is tested in
process and reused by any view (dashboard/pages/report_views.py serves it as JSON and as a page).
Datetimes stay datetimes: the JSON encoder writes them as ISO 8601, the page formats them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from workflows.engine.usage import step_tokens

Row = Mapping[str, Any]


def _ms(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds() * 1000, 2)


def _tool_calls(output: Any) -> int:
    calls = output.get("tool_calls") if isinstance(output, Mapping) else None
    return len(calls) if isinstance(calls, list) else 0


def _cache(output: Any) -> dict[str, Any] | None:
    cache = output.get("cache") if isinstance(output, Mapping) else None
    return dict(cache) if isinstance(cache, Mapping) else None


def step_entry(step: Row) -> dict[str, Any]:
    usage = step.get("usage") or {}
    error = step.get("error") or None
    attempt = int(step.get("attempt") or 0)
    return {
        "id": step["id"],
        "node": step["node_id"],
        "type": step["node_type"],
        "visit": step["visit"],
        "status": step["status"],
        "attempts": attempt,
        "retries": max(attempt - 1, 0),
        "worker": step.get("worker") or "",
        "created_at": step.get("created_at"),
        "started_at": step.get("started_at"),
        "finished_at": step.get("finished_at"),
        "duration_ms": _ms(step.get("started_at"), step.get("finished_at")),
        "tokens": step_tokens(usage),
        "cost_usd": round(float(usage.get("cost_usd") or 0), 8),
        "model": usage.get("model"),
        "tool_calls": _tool_calls(step.get("output")),
        "cache": _cache(step.get("output")),
        "degraded": bool(step.get("degraded")),
        "error": error.get("message") if isinstance(error, Mapping) else error,
    }


def _node_totals(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    nodes: dict[str, dict[str, Any]] = {}
    for entry in entries:
        node = nodes.setdefault(entry["node"], {
            "node": entry["node"], "type": entry["type"], "visits": 0, "attempts": 0, "retries": 0,
            "duration_ms": 0.0, "max_duration_ms": None, "tokens": 0, "cost_usd": 0.0, "tool_calls": 0,
            "cache_hits": 0, "statuses": {},
        })
        node["visits"] += 1
        node["attempts"] += entry["attempts"]
        node["retries"] += entry["retries"]
        if entry["duration_ms"] is not None:
            node["duration_ms"] = round(node["duration_ms"] + entry["duration_ms"], 2)
            node["max_duration_ms"] = max(node["max_duration_ms"] or 0.0, entry["duration_ms"])
        node["tokens"] += entry["tokens"]
        node["cost_usd"] = round(node["cost_usd"] + entry["cost_usd"], 8)
        node["tool_calls"] += entry["tool_calls"]
        node["cache_hits"] += 1 if (entry["cache"] or {}).get("hit") else 0
        node["statuses"][entry["status"]] = node["statuses"].get(entry["status"], 0) + 1
    return list(nodes.values())  # in the order each node was first reached


def _halt(review: Row) -> dict[str, Any]:
    details = review.get("details") or {}
    decision = review.get("decision") or {}
    return {
        "id": review["id"],
        "node": review.get("node_id") or "",
        "reason": review["reason"],
        "status": review["status"],
        "message": details.get("message") or details.get("prompt") or "",
        "created_at": review.get("created_at"),
        "decided_at": review.get("decided_at"),
        "decided_by": review.get("decided_by") or "",
        "action": decision.get("action") if isinstance(decision, Mapping) else None,
        "note": review.get("note") or "",
    }


def _audit(entry: Row) -> dict[str, Any]:
    return {
        "id": entry["id"],
        "at": entry.get("created_at"),
        "actor": entry.get("actor") or "",
        "action": entry["action"],
        "review": entry.get("review_id"),
        "note": entry.get("note") or "",
    }


def build_report(instance: Row, steps: Sequence[Row], reviews: Sequence[Row] = (),
                 audit: Sequence[Row] = (), *, steps_total: int | None = None) -> dict[str, Any]:
    """The report of one instance. `steps`, `reviews` and `audit` in any order (sorted here by id:
    creation order); `decided_by`/`actor` are display names. `steps_total`: how many steps the
    instance has when `steps` holds only the first of them (the report then says it is truncated)."""
    entries = [step_entry(step) for step in sorted(steps, key=lambda s: s["id"])]
    nodes = _node_totals(entries)
    halts = [_halt(review) for review in sorted(reviews, key=lambda r: r["id"])]
    decisions = [_audit(entry) for entry in sorted(audit, key=lambda a: a["id"])]
    durations = [e["duration_ms"] for e in entries if e["duration_ms"] is not None]
    cost = instance.get("cost_usd")
    return {
        "instance": {
            "id": instance["id"], "workflow": instance.get("workflow"), "version": instance.get("version"),
            "status": instance["status"], "halt_reason": instance.get("halt_reason") or "",
            "created_at": instance.get("created_at"), "finished_at": instance.get("finished_at"),
            "trace_id": instance.get("trace_id"),
        },
        "truncated": steps_total is not None and steps_total > len(entries),
        "path": [{"node": e["node"], "type": e["type"], "visit": e["visit"], "step": e["id"], "status": e["status"]}
                 for e in entries],
        "steps": entries,
        "nodes": nodes,
        "halts": halts,
        "audit": decisions,
        "totals": {
            "steps": max(steps_total or 0, len(entries)),
            "nodes": len(nodes),
            "attempts": sum(e["attempts"] for e in entries),
            "retries": sum(e["retries"] for e in entries),
            "step_duration_ms": round(sum(durations), 2),
            "wall_ms": _ms(instance.get("created_at"), instance.get("finished_at")),
            # The instance's own counters are the truth (the steps' usage adds up to them).
            "tokens": int(instance.get("tokens") or 0),
            "cost_usd": (float(Decimal(str(cost))) if cost is not None
                         else round(sum(e["cost_usd"] for e in entries), 8)),
            "tool_calls": sum(e["tool_calls"] for e in entries),
            "cache_hits": sum(n["cache_hits"] for n in nodes),
            "halts": len(halts),
            "decisions": len(decisions),
        },
    }
