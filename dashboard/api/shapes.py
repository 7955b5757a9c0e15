"""The JSON shapes both APIs answer with (the pages' endpoints in dashboard/api/ and v1 in
dashboard/api/v1/): an instance, its events after a seq, a step, a workflow and its versions, the
answer to a save, the circuit breakers, an instance's run report. Reads only; the services that act
(start, save, plan) are dashboard/api/services.py, the graph diff dashboard/api/diff_details.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db.models import F

from workflows.engine import breaker as breaker_logic
from workflows.engine.usage import has_split, step_tokens
from workflows.models import (
    AuditEntry,
    BreakerState,
    ReviewItem,
    StepRun,
    WorkflowDefinition,
    WorkflowInstance,
    WorkflowVersion,
)
from workflows.operators.api_shapes import run_summary
from workflows.operators.report import build_report


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# --- Instances ----------------------------------------------------------------------------------------

def instance_json(instance: WorkflowInstance) -> dict[str, Any]:
    """The CLI's run summary (workflows/operators/api_shapes.py) keyed by `id`, with the API's extra fields."""
    data = run_summary(instance)
    data["id"] = data.pop("instance")
    data.update({
        "max_transitions": instance.max_transitions,
        "created_at": instance.created_at.isoformat(),
        "finished_at": instance.finished_at.isoformat() if instance.finished_at else None,
        # The sequence number the status is true at: the live page lets the status win from there on.
        "event_seq": instance.event_seq,
    })
    return data


def events_after(instance: WorkflowInstance, after: int, limit: int) -> dict[str, Any]:
    """An instance's events after sequence number `after` (oldest first, at most `limit`) and its last
    sequence number: what a client polls to follow an instance."""
    events = instance.events.filter(seq__gt=after).order_by("seq")[:limit]
    return {"events": [e.as_message() for e in events], "last_seq": instance.event_seq}


def step_json(step: StepRun, child: dict[str, Any] | None = None) -> dict[str, Any]:
    usage = step.usage or {}
    duration = step.duration_s
    return {
        "id": step.pk,
        "node": step.node_id,
        "type": step.node_type,
        "visit": step.visit,
        "attempt": step.attempt,
        "status": step.status,
        "queue": step.queue,
        "worker": step.worker,
        "created_at": iso(step.created_at),
        "started_at": iso(step.started_at),
        "finished_at": iso(step.finished_at),
        "due_at": iso(step.due_at),
        "duration_ms": round(duration * 1000, 2) if duration is not None else None,
        "input": step.input,
        "output": step.output,
        "error": step.error,
        "usage": step.usage,
        # One rule with the run report and the instance's total (engine/usage.py); the inspector shows the
        # in/out split only where the usage has one (an llm step, not a sub-workflow's or planner's total).
        "tokens": step_tokens(usage),
        "tokens_split": has_split(usage),
        "cost_usd": float(usage.get("cost_usd", 0) or 0),
        "idempotency_key": step.idempotency_key,
        "degraded": step.degraded,
        **({"child": child} if child is not None else {}),
    }


# --- Workflows and versions ---------------------------------------------------------------------------

def user_name(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def version_summary(version: WorkflowVersion, instances: int | None = None) -> dict[str, Any]:
    graph = version.graph if isinstance(version.graph, dict) else {}
    out = {
        "number": version.number,
        "message": version.message,
        "created_by": user_name(version.created_by),
        "created_at": version.created_at.isoformat(),
        "checksum": version.checksum,
        "nodes": len(graph.get("nodes") or []),
        "edges": len(graph.get("edges") or []),
    }
    if instances is not None:
        out["instances"] = instances
    return out


def definition_json(definition: WorkflowDefinition) -> dict[str, Any]:
    return {"slug": definition.slug, "name": definition.name, "description": definition.description,
            "archived": definition.archived}


def saved_json(version: WorkflowVersion, replaced: WorkflowVersion | None) -> dict[str, Any]:
    """The answer to a save: the workflow and the new version, and `replaced` when "save anyway" saved
    over a version someone else saved after the one the edit started from."""
    answer: dict[str, Any] = {"workflow": definition_json(version.definition), "version": version_summary(version)}
    if replaced is not None:
        answer["replaced"] = version_summary(replaced)
    return answer


def input_schema(graph: Any) -> dict[str, Any] | None:
    """A version's declared start input (the graph's `input` JSON Schema), or None."""
    schema = graph.get("input") if isinstance(graph, dict) else None
    return schema if isinstance(schema, dict) else None


# --- The breakers (the system view) and the run report -----------------------------------------------

def breakers(now: datetime) -> list[dict[str, Any]]:
    from workflows.adapters.breakers import breaker_config

    config = breaker_config()
    result = []
    for row in BreakerState.objects.order_by("key"):
        state = breaker_logic.Breaker(state=row.state, buckets=row.buckets or {}, opened_at=row.opened_at,
                                      trial_started_at=row.trial_started_at)
        calls, failures = state.counts(now.timestamp(), config)
        cooldown_left = None
        if row.state == breaker_logic.OPEN and row.opened_at is not None:
            cooldown_left = max(0.0, round(row.opened_at + config.cooldown_s - now.timestamp(), 1))
        result.append({"key": row.key, "state": row.state, "calls": calls, "failures": failures,
                       "opened_at": (datetime.fromtimestamp(row.opened_at, tz=UTC).isoformat()
                                     if row.opened_at else None),
                       "cooldown_left_s": cooldown_left, "updated_at": iso(row.updated_at)})
    return result


STEP_FIELDS = ("id", "node_id", "node_type", "visit", "attempt", "status", "worker", "created_at", "started_at",
               "finished_at", "usage", "error", "degraded")
# Of a step's output the report reads two keys only: those are selected (never the whole output, up to
# MAX_PAYLOAD_BYTES per step), and the rows are streamed from the database in chunks.
OUTPUT_KEYS = {"output_tool_calls": "output__tool_calls", "output_cache": "output__cache"}
CHUNK = 500
# The steps a report lists, and sums per node (an instance may run up to MAX_TRANSITIONS steps): past
# this the report says `truncated` and its per-node figures cover the first MAX_REPORT_STEPS; the
# instance's token and cost totals stay exact (they come from its own counters).
MAX_REPORT_STEPS = 10_000


def report_for(instance: WorkflowInstance) -> dict[str, Any]:
    """Load the rows of one instance and build its report."""
    rows = StepRun.objects.filter(instance=instance)
    picked = rows.order_by("id").values(*STEP_FIELDS, **{k: F(v) for k, v in OUTPUT_KEYS.items()})
    steps = [slim_step(row) for row in picked[:MAX_REPORT_STEPS].iterator(chunk_size=CHUNK)]
    total = rows.count() if len(steps) == MAX_REPORT_STEPS else len(steps)
    reviews = list(ReviewItem.objects.filter(instance=instance).annotate(decided_by_name=F("decided_by__username"))
                   .values("id", "node_id", "reason", "status", "details", "decision", "created_at", "decided_at",
                           "decided_by_name", "note"))
    for review in reviews:
        review["decided_by"] = review.pop("decided_by_name")
    audit = list(AuditEntry.objects.filter(instance=instance).annotate(actor_name=F("actor__username"))
                 .values("id", "action", "created_at", "actor_name", "review_id", "note"))
    for entry in audit:
        entry["actor"] = entry.pop("actor_name")
    row = {"id": instance.pk, "workflow": instance.version.definition.slug, "version": instance.version.number,
           "status": instance.status, "halt_reason": instance.halt_reason, "created_at": instance.created_at,
           "finished_at": instance.finished_at, "trace_id": instance.trace_id, "tokens": instance.tokens,
           "cost_usd": instance.cost_usd}
    return build_report(row, steps, reviews, audit, steps_total=total)


def slim_step(row: dict[str, Any]) -> dict[str, Any]:
    """A step row as the report reads it: its output reduced to the tool calls' count and the cache info."""
    calls, cache = row.pop("output_tool_calls", None), row.pop("output_cache", None)
    row["output"] = {"tool_calls": [None] * len(calls) if isinstance(calls, list) else None, "cache": cache}
    return row
