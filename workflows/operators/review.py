"""Operators' decisions on the review queue: approve and continue (with more transitions, more
budget, an edited context or a chosen next node), retry, reject, cancel, and human-task answers.

Every decision locks the instance row, then the item; an item already decided raises
ReviewConflict, so of two operators deciding at once exactly one decision applies. Each decision is
audited (actor, time, before/after) and written to the event log.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import jsonschema
from django.conf import settings
from django.db import transaction

from workflows import clock, runtime
from workflows.engine import activations, limits
from workflows.engine.errors import ExpressionError
from workflows.engine.schema_checks import schema_problem
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.models import AuditEntry, ReviewItem, ReviewStatus, StepRun, WorkflowInstance

DECIDE_PERMISSION = "workflows.decide_reviewitem"
ACTIONS = ("approve", "retry", "reroute", "edit_context", "reject", "cancel")


class ReviewError(Exception):
    """A decision that cannot apply as asked (bad input, wrong kind of item)."""


class ReviewConflict(ReviewError):
    """Someone decided this item first."""


class ReviewForbidden(ReviewError):
    """The user may not make this decision."""


@dataclass
class Decision:
    action: str
    extra_transitions: int | None = None
    extra_budget_usd: str | float | None = None
    extra_tokens: int | None = None
    extra_ttl_s: float | None = None
    context: dict[str, Any] | None = None
    goto: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def refusal(user: Any, item: ReviewItem | None = None) -> str | None:
    """Why `user` may not decide `item` (or review items in general, without one), None when they may.

    Deciding needs the decide permission (the operators group). An item with an `assignee_group` (a human
    task's, "operators" unless the node names another) may only be answered by a member of that group;
    superusers may answer any item. decide() enforces this for every caller (dashboard, admin, API)."""
    if user is None or not user.is_authenticated:
        return "log in to decide review items"
    if not user.has_perm(DECIDE_PERMISSION):
        return f"permission denied: you need {DECIDE_PERMISSION} (the operators group) to decide review items"
    group = item.assignee_group if item is not None else ""
    if group and not user.is_superuser and not user.groups.filter(name=group).exists():
        return f"permission denied: only members of the group '{group}' may answer this task"
    return None


def can_decide(user: Any, item: ReviewItem | None = None) -> bool:
    return refusal(user, item) is None


def _snapshot(inst: WorkflowInstance) -> dict[str, Any]:
    return {"status": inst.status, "reason": inst.halt_reason, "context": inst.context,
            "max_transitions": inst.max_transitions, "loop_count": inst.loop_count,
            "budget_usd": str(inst.budget_usd) if inst.budget_usd is not None else None,
            "budget_tokens": inst.state.get("budget_tokens")}


def context_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": sorted(k for k in set(before) & set(after) if before[k] != after[k]),
    }


def decide(item_id: int, user: Any, decision: Decision, *, authorized: bool = False) -> ReviewItem:
    """Apply one operator decision. Raises ReviewForbidden (see refusal), ReviewConflict or ReviewError.
    `authorized`: the caller has checked who may decide by other means (an emailed approver's signed
    link, workflows/triggers/action_links.py); every other rule (four eyes, the task's fields) applies."""
    found = ReviewItem.objects.filter(pk=item_id).only("instance_id", "assignee_group").first()
    refused = None if authorized else refusal(user, found)
    if refused is not None:
        raise ReviewForbidden(refused)
    if decision.action not in ACTIONS:
        raise ReviewError(f"unknown action {decision.action!r} (one of {', '.join(ACTIONS)})")
    if found is None:
        raise ReviewError(f"review item {item_id} does not exist")
    instance_id = found.instance_id
    now = clock.now()
    with transaction.atomic():
        # Lock order instance -> item, the same as the runtime's (it closes items under the instance lock).
        inst = runtime.lock(instance_id)
        item = ReviewItem.objects.select_for_update().get(pk=item_id)
        if item.status != ReviewStatus.OPEN:
            who = item.decided_by.get_username() if item.decided_by else "the system"
            when = item.decided_at.strftime("%Y-%m-%d %H:%M:%S") if item.decided_at else "earlier"
            raise ReviewConflict(f"review item {item.pk} was already {item.status} by {who} at {when}")
        _check_four_eyes(inst, user, decision)
        before = _snapshot(inst)
        tr = runtime.UnitOfWork(inst, runtime.graph_for_version(inst.version_id), now)
        if item.reason == "human_task":
            _answer_human(tr, item, user, decision)
        else:
            _decide_halt(tr, item, decision)
        item.status = (ReviewStatus.REJECTED if decision.action == "reject" else
                       ReviewStatus.CANCELLED if decision.action == "cancel" else ReviewStatus.APPROVED)
        item.decision = _decision_record(decision)
        item.decided_by = user
        item.decided_at = now
        item.note = decision.note
        item.save(update_fields=["status", "decision", "decided_by", "decided_at", "note"])
        tr.event("review_decided", item.node_id, None, review=item, action=decision.action,
                 by=user.get_username(), note=decision.note)
        after = _snapshot(inst)
        if before["context"] != after["context"]:
            after["context_diff"] = context_diff(before["context"], after["context"])
        AuditEntry.objects.create(instance=inst, review=item, actor=user, action=decision.action, before=before,
                                  after=after, note=decision.note, created_at=now)
        runtime.apply(tr)
    return item


def _decision_record(decision: Decision) -> dict[str, Any]:
    record = {k: v for k, v in decision.__dict__.items() if v not in (None, {}, "")}
    if "extra_budget_usd" in record:
        record["extra_budget_usd"] = str(record["extra_budget_usd"])
    return record


def _check_four_eyes(inst: WorkflowInstance, user: Any, decision: Decision) -> None:
    if decision.action in ("reject", "cancel") or not settings.STEADYFLOW["REVIEW_FOUR_EYES"]:
        return
    if inst.created_by_id is not None and inst.created_by_id == user.pk:
        raise ReviewForbidden("four-eyes rule: the user who started an instance cannot approve it")


def _decide_halt(tr: runtime.UnitOfWork, item: ReviewItem, decision: Decision) -> None:
    inst = tr.instance
    if decision.action == "cancel":
        runtime.stop_instance(tr, InstanceStatus.CANCELLED, "cancelled",
                               {"message": f"cancelled in review: {decision.note}".strip(": ")})
        return
    if decision.action == "reject":
        runtime.stop_instance(tr, InstanceStatus.FAILED, "rejected",
                               {"message": f"rejected in review: {decision.note}".strip(": "),
                                "halt_reason": item.reason})
        if item.reason != "compensation_failed":
            # Rejecting a failed compensation gives up on it; any other rejection compensates.
            runtime.start_compensation(tr)
        return
    if inst.status != InstanceStatus.HALTED:
        raise ReviewError(f"instance {inst.pk} is {inst.status}, not halted: nothing to continue")
    _apply_grants(tr, item, decision)
    if decision.action == "edit_context" or decision.context is not None:
        if not isinstance(decision.context, dict):
            raise ReviewError("the edited context must be a JSON object")
        runtime.check_payload("context", decision.context)
        tr.set_instance(context=decision.context)
    goto = None
    if decision.action == "reroute":
        if not decision.goto or decision.goto not in tr.graph.nodes:
            raise ReviewError(f"reroute needs a node of this workflow (one of {', '.join(tr.graph.nodes)})")
        if tr.graph.nodes[decision.goto].type == "start":
            raise ReviewError("cannot reroute to the start node")
        goto = decision.goto
    runtime.resume(tr, goto=goto, note=decision.note)


def _grant(value: Any, name: str, maximum: Any, kind: type = int) -> Any:
    """An operator's grant as a number within its documented bound (workflows/engine/limits.py)."""
    try:
        amount = Decimal(str(value)) if kind is Decimal else kind(value)
    except (InvalidOperation, OverflowError, TypeError, ValueError):
        raise ReviewError(f"{name} {value!r} is not a number") from None
    if isinstance(value, bool) or (kind is not Decimal and not math.isfinite(amount)) or \
            (kind is Decimal and not amount.is_finite()):
        raise ReviewError(f"{name} {value!r} is not a number")
    if amount < 0:
        raise ReviewError(f"{name} must be zero or more")
    if amount > maximum:
        raise ReviewError(f"{name} must be at most {maximum}")
    return amount


def _apply_grants(tr: runtime.UnitOfWork, item: ReviewItem, decision: Decision) -> None:
    inst = tr.instance
    extra = decision.extra_transitions
    if extra is None and item.reason == "loop_breaker":
        # Continuing a looped instance without more room would halt it again at once: it gets the
        # graph's limit again (its own, or the default for it, engine/activations.py).
        extra = activations.max_transitions(tr.graph, runtime.conf("DEFAULT_MAX_TRANSITIONS"))
    if extra is not None:
        grant = _grant(extra, "extra transitions", limits.MAX_GRANT_TRANSITIONS)
        if inst.max_transitions + grant > limits.MAX_TOTAL_TRANSITIONS:
            raise ReviewError(f"the instance may not go past {limits.MAX_TOTAL_TRANSITIONS} transitions in all")
        tr.set_instance(max_transitions=inst.max_transitions + grant)
    if decision.extra_budget_usd not in (None, ""):
        amount = _grant(decision.extra_budget_usd, "extra budget", limits.MAX_GRANT_BUDGET_USD, Decimal)
        total = (inst.budget_usd or Decimal(0)) + amount
        if total > limits.MAX_TOTAL_BUDGET_USD:
            raise ReviewError(f"the instance's budget may not go past {limits.MAX_TOTAL_BUDGET_USD} USD in all")
        tr.set_instance(budget_usd=total)
    if decision.extra_tokens is not None:
        tokens = _grant(decision.extra_tokens, "extra tokens", limits.MAX_GRANT_TOKENS)
        state = inst.state
        state["budget_tokens"] = (state.get("budget_tokens") or 0) + tokens
        tr.set_instance(state=state)
    if decision.extra_ttl_s is not None:
        seconds = _grant(decision.extra_ttl_s, "extra time", limits.MAX_GRANT_TTL_S, float)
        if seconds <= 0:
            raise ReviewError("extra time must be more than zero seconds")
        base = max(inst.deadline or tr.now, tr.now)
        tr.set_instance(deadline=base + timedelta(seconds=seconds))
    if item.reason == "budget_exceeded" and runtime.budget_exceeded(inst) is not None:
        raise ReviewError("the instance is still over its budget: grant more budget to continue")


def _answer_human(tr: runtime.UnitOfWork, item: ReviewItem, user: Any, decision: Decision) -> None:
    """A human task: approve/reject become the node's output ({"approved": …, inputs…})."""
    if decision.action == "cancel":
        runtime.stop_instance(tr, InstanceStatus.CANCELLED, "cancelled",
                               {"message": f"cancelled at human task {item.node_id}"})
        return
    if decision.action not in ("approve", "reject"):
        raise ReviewError(f"a human task is answered with approve or reject, not {decision.action}")
    step = StepRun.objects.select_for_update().get(pk=item.step_id)
    if step.status != StepStatus.PENDING:
        raise ReviewConflict(f"the human task's step is already {step.status}")
    node = tr.graph.nodes[step.node_id]
    declared = node.config.get("inputs") or {}
    inputs = dict(decision.inputs or {})
    if decision.action == "approve":
        for name, schema in declared.items():
            if name not in inputs:
                raise ReviewError(f"input '{name}' is required")
            # A graph stored before schemas were checked at save may declare one that is not a schema:
            # refused with a 4xx naming it (the task can still be rejected or cancelled).
            problem = schema_problem(schema)
            if problem:
                raise ReviewError(f"input '{name}': its declared schema {problem}; reject or cancel the task")
            try:
                jsonschema.validate(inputs[name], schema)
            except jsonschema.ValidationError as exc:
                raise ReviewError(f"input '{name}': {exc.message}") from None
    unknown = sorted(set(inputs) - set(declared))
    if unknown:
        raise ReviewError(f"unknown input(s): {', '.join(unknown)}")
    output = {**inputs, "approved": decision.action == "approve", "answered_by": user.get_username(),
              "note": decision.note}
    tr.update_step(step, status=StepStatus.SUCCEEDED, output=output, finished_at=tr.now, attempt=1,
                   started_at=step.created_at, worker=user.get_username())
    tr.event("step_succeeded", step.node_id, step, visit=step.visit, attempt=1, answered_by=user.get_username())
    inst = tr.instance
    tr.set_instance(open_steps=inst.open_steps - 1)
    # Another human task, or a sub-workflow's running child, keeps the instance waiting.
    still_waiting = runtime.others_waiting(tr, step)
    if inst.status == InstanceStatus.WAITING and not still_waiting:
        tr.set_instance(status=InstanceStatus.RUNNING)
    try:
        fired = runtime.fired_edges(tr, step.node_id, output)
    except ExpressionError as exc:
        # The answer cannot route on: refused (nothing commits), with the edge and the reason.
        raise ReviewError(f"node '{step.node_id}': {exc}") from None
    runtime.resolve(tr, step, fired)


def resume_circuit_halts(user: Any, breaker_key: str | None = None, note: str = "") -> int:
    """Bulk-approve the instances halted by an open breaker once it has closed or its cool-down has
    passed (their calls are then its trial calls). Returns how many."""
    from workflows.adapters.breakers import is_blocking

    items = ReviewItem.objects.filter(status=ReviewStatus.OPEN, reason="circuit_open")
    if breaker_key:
        items = items.filter(details__breaker=breaker_key)
    resumed = 0
    for item in items:
        key = item.details.get("breaker", "")
        if is_blocking(key):
            continue
        try:
            decide(item.pk, user, Decision(action="approve", note=note or f"breaker {key} closed"))
            resumed += 1
        except ReviewConflict:
            continue
    return resumed
