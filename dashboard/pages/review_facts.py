"""What the review pages show about an item: why it is open (the loop path with visit counts, the
breaker's window and state, the budget spent against its limit, the deadline), the instance's recent
steps and each node's latest state and visit count (the read-only graph), and a decision's label.

Shared by the review page (dashboard/pages/review_views.py), the inbox API (dashboard/api/review_api.py) and the
instance page (dashboard/pages/views.py)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.utils import timezone

from workflows.engine.schema_checks import schema_problem
from workflows.models import AuditEntry, ReviewItem, ReviewReason, ReviewStatus, StepRun, WorkflowInstance

RECENT_STEPS = 20

# What the header says once an item is decided: "approved" alone hides an edited context or a reroute.
DECISION_LABELS = {
    "approve": "approved", "retry": "approved: step retried", "reroute": "approved: rerouted",
    "edit_context": "approved with an edited context", "reject": "rejected", "cancel": "cancelled",
}


def decision_label(item: ReviewItem) -> str:
    """"approved with an edited context", "approved: rerouted to fix", or the status of an open item."""
    if item.status == ReviewStatus.OPEN:
        return str(item.status)
    decision = item.decision or {}
    action = str(decision.get("action", ""))
    label = DECISION_LABELS.get(action, str(item.status))
    if action == "reroute" and decision.get("goto"):
        label += f" to {decision['goto']}"
    elif action == "approve" and decision.get("context") is not None:
        label = DECISION_LABELS["edit_context"]
    return label


def path_with_visits(path: list[str]) -> list[dict[str, Any]]:
    """The loop path as steps with each node's running visit count: a, b, a -> a×1, b×1, a×2."""
    seen: Counter[str] = Counter()
    out = []
    for node in path:
        seen[node] += 1
        out.append({"node": node, "visit": seen[node]})
    return out


def why(item: ReviewItem, instance: WorkflowInstance) -> dict[str, Any]:
    """The facts that explain the item, by reason (only what applies; every value JSON-ready)."""
    details = item.details or {}
    facts: dict[str, Any] = {"reason": item.reason, "message": details.get("message") or details.get("prompt", "")}
    if item.reason == ReviewReason.LOOP_BREAKER:
        path = [str(node) for node in details.get("path") or []]
        facts["path"] = path_with_visits(path)
        facts["visits"] = dict(Counter(path).most_common())
        facts["next"] = details.get("next") or []
        facts["max_transitions"] = details.get("max_transitions", instance.max_transitions)
        facts["loop_count"] = instance.loop_count
    elif item.reason == ReviewReason.CIRCUIT_OPEN:
        from dashboard.api.shapes import breakers

        key = str(details.get("breaker", ""))
        facts["breaker"] = next((b for b in breakers(timezone.now()) if b["key"] == key), {"key": key})
        from workflows.adapters.breakers import breaker_config

        config = breaker_config()
        facts["breaker_config"] = {"window_s": config.window_s, "failure_ratio": config.failure_ratio,
                                   "min_calls": config.min_calls, "cooldown_s": config.cooldown_s}
    elif item.reason == ReviewReason.BUDGET_EXCEEDED:
        facts["budget"] = {"cost_usd": float(instance.cost_usd),
                           "budget_usd": float(instance.budget_usd) if instance.budget_usd is not None else None,
                           "tokens": instance.tokens, "budget_tokens": instance.state.get("budget_tokens")}
    elif item.reason == ReviewReason.TTL_EXPIRED:
        facts["deadline"] = instance.deadline.isoformat() if instance.deadline else None
        facts["ttl_s"] = (instance.deadline - instance.created_at).total_seconds() if instance.deadline else None
    elif item.reason == ReviewReason.HUMAN_TASK:
        facts["prompt"] = details.get("prompt", "")
        facts["inputs"] = shown_inputs(details.get("inputs") or {})
    if details.get("node"):
        facts["node"] = details["node"]
    return facts


def shown_inputs(declared: Any) -> dict[str, Any]:
    """A human task's declared inputs for the review form. A schema stored before schemas were checked
    at save (engine/schema_checks.py) that is not one becomes a plain JSON field saying so (the approval
    refuses it with the same words), so neither the page nor its script trips on it."""
    if not isinstance(declared, dict):
        return {}
    out: dict[str, Any] = {}
    for name, schema in declared.items():
        problem = schema_problem(schema)
        out[str(name)] = ({"title": str(name), "description": f"This input's declared schema {problem}."}
                          if problem else schema)
    return out


def node_states(instance: WorkflowInstance) -> dict[str, dict[str, Any]]:
    """{node: {state, visits}} from the step runs (latest status, highest visit): the read-only graph."""
    out: dict[str, dict[str, Any]] = {}
    for node, status, visit in StepRun.objects.filter(instance=instance).order_by("id") \
            .values_list("node_id", "status", "visit"):
        entry = out.setdefault(node, {"state": None, "visits": 0})
        entry["state"] = status
        entry["visits"] = max(entry["visits"], visit or 0)
    return out


def graph_states(item: ReviewItem, instance: WorkflowInstance) -> dict[str, dict[str, Any]]:
    """node_states, with the node(s) an open halt stopped at drawn `halted` (as the live page draws them)."""
    states = node_states(instance)
    details = item.details or {}
    if item.status == ReviewStatus.OPEN and item.reason != ReviewReason.HUMAN_TASK:
        for node in ([details["node"]] if details.get("node") else details.get("next") or []):
            states.setdefault(str(node), {"state": None, "visits": 0})["state"] = "halted"
    return states


def recent_steps(instance: WorkflowInstance, limit: int = RECENT_STEPS) -> list[StepRun]:
    return list(reversed(StepRun.objects.filter(instance=instance).order_by("-id")[:limit]))


def audit_rows(item: ReviewItem) -> list[dict[str, Any]]:
    """The audit trail with the context diff as JSON (never a Python repr)."""
    rows = []
    for entry in AuditEntry.objects.filter(review=item).select_related("actor").order_by("created_at"):
        diff = (entry.after or {}).get("context_diff")
        rows.append({"at": entry.created_at, "actor": entry.actor, "action": entry.action, "note": entry.note,
                     "diff": json.dumps(diff, sort_keys=True) if diff else ""})
    return rows


def item_json(item: ReviewItem) -> dict[str, Any]:
    details = item.details or {}
    return {"id": item.pk, "instance": item.instance_id, "reason": item.reason, "node": item.node_id,
            "status": item.status, "workflow": item.instance.version.definition.slug,
            "created_at": item.created_at.isoformat(), "assignee_group": item.assignee_group,
            "message": details.get("message") or details.get("prompt", ""),
            "decided": decision_label(item) if item.status != ReviewStatus.OPEN else None}
