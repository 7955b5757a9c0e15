"""Sub-workflows on the runtime's side (the node is workflows/engine/nodes/subworkflow.py).

- A subworkflow step's handler starts its child through `StepSubflows.child` (the same start
  function as the API, with an idempotency key derived from the step: `subflow:<instance>:<node>:
  <visit>:<n>`, n counting the children this step started, so a replayed run finds its child
  instead of starting another) and returns `waiting_on`: `await_child` parks the step (pending, no
  due time, no worker) and the instance waits.
- The child's end (completed, failed, cancelled) commits with a post-commit effect, `child_ended`,
  that settles the parent step in its own transaction (locking only the parent): completed queues
  it again (its handler maps the child's result), failed fails the attempt (the node's retry policy:
  a retry starts a new child), cancelled fails it for good. If the process dies between the two
  commits, the reconciler's `reconcile` settles it.
- A cancelled parent step cancels its active children (post-commit, and the reconciler); a parent
  that compensates compensates the children its steps completed.

Locks: a transition here locks one instance at a time (the parent's settle reads the child
without locking it: a child that ended does not change again), so nothing waits on a lock held
while it waits for another.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils.text import slugify

from workflows import clock
from workflows import store as stores
from workflows.engine import generated_slugs
from workflows.engine.errors import ExpressionError, PayloadTooLarge, PermanentStepError, StepError
from workflows.engine.inputs import InputInvalid
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import ChildRun, RecordedPlan
from workflows.engine.planner import plan_issues_text
from workflows.engine.statuses import INSTANCE_ACTIVE, InstanceStatus, StepStatus
from workflows.models import StepRun, WorkflowDefinition, WorkflowInstance, WorkflowVersion
from workflows.runtime import effects
from workflows.runtime.compensation import start_compensation
from workflows.runtime.config import child_kinds, graph_for_version, node_for_step, person_kinds
from workflows.runtime.decided_steps import steps_of
from workflows.runtime.instance_control import cancel_instance
from workflows.runtime.records import Claim, ParentLink
from workflows.runtime.redaction import redacted_input
from workflows.runtime.step_outcomes import fail_attempt
from workflows.runtime.unit import UnitOfWork

log = logging.getLogger("steadyflow.runtime")

NODE_TYPE = "subworkflow"
PLAN_MESSAGE = "plan of step {key}"  # how a planner step finds the plan it recorded (RecordedPlan)
# A child in one of these no longer runs for its parent step: its end fails the step.
CHILD_FAILED = frozenset({InstanceStatus.FAILED, InstanceStatus.CANCELLED, InstanceStatus.COMPENSATING,
                          InstanceStatus.COMPENSATED})
CHILD_ENDED = CHILD_FAILED | {InstanceStatus.COMPLETED}
CHILD_ALIVE = INSTANCE_ACTIVE | {InstanceStatus.HALTED}
BATCH = 200


def depth_of(instance: WorkflowInstance) -> int:
    return int(instance.state.get("depth", 0))


def as_child_run(child: WorkflowInstance) -> ChildRun:
    version = WorkflowVersion.objects.select_related("definition").only(
        "number", "definition__slug").get(pk=child.version_id)
    return ChildRun(id=child.pk, workflow=version.definition.slug, version=version.number, status=str(child.status),
                    depth=depth_of(child), context=dict(child.context), tokens=int(child.tokens),
                    cost_usd=float(child.cost_usd))


def children_of(step_id: int) -> list[WorkflowInstance]:
    return list(WorkflowInstance.objects.filter(parent_step_id=step_id).order_by("id"))


def version_to_run(workflow: str, version: int | None, *, own_plan: bool = False) -> WorkflowVersion:
    """The version a subworkflow step starts. An archived definition is not started, nor a generated
    plan definition (engine/generated_slugs.py), except by the planner step that recorded it (`own_plan`)."""
    definition = WorkflowDefinition.objects.filter(slug=workflow).first()
    if definition is None:
        raise PermanentStepError(f"sub-workflow '{workflow}' does not exist")
    if not own_plan and generated_slugs.is_generated(workflow):
        raise PermanentStepError(f"sub-workflow '{workflow}' is a generated plan definition: only its planner "
                                 "step starts it")
    if not own_plan and definition.archived:
        raise PermanentStepError(f"sub-workflow '{workflow}' is archived: unarchive it to start it")
    found: WorkflowVersion | None = (definition.versions.filter(number=version).first() if version is not None
                                     else definition.latest_version())
    if found is None:
        raise PermanentStepError(f"sub-workflow '{workflow}' has no version {version}" if version is not None
                                 else f"sub-workflow '{workflow}' has no version")
    return found


class StepSubflows:
    """The `Subflows` port of one claimed subworkflow step (engine/nodes/base.py)."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.depth = depth_of(claim.instance)

    def child(self, workflow: str, version: int | None, start_input: dict[str, Any]) -> ChildRun:
        from workflows.runtime.starting import start_instance

        step = self.claim.step
        children = children_of(step.pk)
        if children and children[-1].status not in CHILD_FAILED:
            return as_child_run(children[-1])  # replayed (a lost worker, a requeue): the same child
        # A planner step starts only the plan it recorded, under its own generated definition.
        own_plan = step.node_type == "planner" and workflow == self.plan_slug()
        target = version_to_run(workflow, version, own_plan=own_plan)
        parent = self.claim.instance
        user = parent.created_by if parent.created_by_id else None
        key = f"subflow:{step.idempotency_key}:{len(children) + 1}"
        try:
            child = start_instance(target, start_input, idempotency_key=key, user=user,
                                   parent=ParentLink(step.pk, self.depth + 1), priority=step.priority)
        except (InputInvalid, ExpressionError, PayloadTooLarge) as exc:
            # The child's declared input refused it, a start condition failed on it, or it is too big.
            raise PermanentStepError(f"sub-workflow '{workflow}' refused its input: {exc}") from None
        return as_child_run(child)

    # --- A planner step's plan (engine/nodes/planner.py) ------------------------------------------

    def plan_slug(self) -> str:
        """The hidden definition a planner node's plans are saved under: `<parent-slug>--plan-<node>`."""
        parent = WorkflowVersion.objects.select_related("definition").only("definition__slug").get(
            pk=self.claim.instance.version_id).definition.slug
        node = slugify(self.claim.step.node_id.replace("_", "-"))
        return generated_slugs.plan_slug(parent, node)

    def remaining(self) -> dict[str, float | int | None]:
        inst = self.claim.instance
        budget_tokens = inst.state.get("budget_tokens")
        return {
            "budget_usd": (float(inst.budget_usd) - float(inst.cost_usd)) if inst.budget_usd is not None else None,
            "budget_tokens": (int(budget_tokens) - int(inst.tokens)) if budget_tokens is not None else None,
            "max_transitions": int(inst.max_transitions) - int(inst.loop_count),
        }

    def recorded_plan(self) -> RecordedPlan | None:
        message = PLAN_MESSAGE.format(key=self.claim.step.idempotency_key)
        found = (WorkflowVersion.objects.filter(definition__slug=self.plan_slug(), message=message)
                 .order_by("-number").first())
        if found is None:
            return None
        planned = found.graph.get("planned") if isinstance(found.graph, dict) else None
        usage = planned.get("usage") if isinstance(planned, dict) else None
        return RecordedPlan(workflow=self.plan_slug(), version=found.number, graph=found.graph,
                            usage=dict(usage) if isinstance(usage, dict) else {})

    def record_plan(self, graph: dict[str, Any], usage: dict[str, Any], objective: str) -> RecordedPlan:
        from workflows.credentials.store import validate

        # Its max_transitions is the parent's bound (engine/nodes/planner.py `bounded`): not refused
        # for being below the plan's shortest run; the child halts into review when it runs out.
        issues = validate(graph, imposed_limit=True)
        if issues:
            listed = plan_issues_text(issues)
            raise PermanentStepError(f"node '{self.claim.step.node_id}': the plan was refused: {listed}",
                                     details={"plan": graph, "issues": [i.as_dict() for i in issues]})
        step = self.claim.step
        # What the plan's own page says of it: who planned it, for what, at what cost.
        recorded = {**graph, "planned": {"instance": self.claim.instance.pk, "node": step.node_id,
                                         "visit": step.visit, "objective": objective[:500], "usage": usage}}
        slug = self.plan_slug()
        with transaction.atomic():
            # Saved here, not with definitions.save_version: that one refuses a slug with "--", which is
            # what keeps a designer's workflow from ever sharing this generated one's name. Hidden
            # (archived): started only by its step. Validated above (no subworkflow can be in a plan).
            definition, _ = WorkflowDefinition.objects.select_for_update().get_or_create(
                slug=slug, defaults={"name": f"Plans of {step.node_id}", "archived": True,
                                     "description": "Graphs a planner node proposed (generated)."})
            latest = definition.versions.aggregate(n=Max("number"))["n"] or 0
            version = WorkflowVersion.objects.create(definition=definition, number=latest + 1, graph=recorded,
                                                     message=PLAN_MESSAGE.format(key=step.idempotency_key))
        return RecordedPlan(workflow=slug, version=version.number, graph=version.graph, usage=usage)


# --- Deciding on the parent (its instance locked) ----------------------------------------------------

def await_child(uow: UnitOfWork, step: StepRun, claim: Claim, child_id: int) -> None:
    """The handler started (or found) its child: park the step until the child ends; or, when it
    ended already (a quick child whose own settle found this step still running), settle now."""
    child = WorkflowInstance.objects.get(pk=child_id)
    if child.status in CHILD_ENDED:
        settle(uow, step, claim, child)
        return
    uow.update_step(step, status=StepStatus.PENDING, due_at=None, lease_token="", lease_until=None,
                    input=redacted_input(claim))
    uow.event("step_waiting", step.node_id, step, visit=step.visit, child=child.pk)
    if uow.instance.status == InstanceStatus.RUNNING:
        uow.set_instance(status=InstanceStatus.WAITING)


def settle(uow: UnitOfWork, step: StepRun, claim: Claim, child: WorkflowInstance) -> None:
    """A child ended: a completed one queues the step again (its handler maps the result, the same
    attempt); a failed one fails the attempt (retry per the node's policy); a cancelled one fails
    the step for good."""
    inst = uow.instance
    if inst.status == InstanceStatus.WAITING and not other_waiting(uow, step):
        uow.set_instance(status=InstanceStatus.RUNNING)
    if child.status == InstanceStatus.COMPLETED:
        uow.update_step(step, status=StepStatus.QUEUED, due_at=uow.now, attempt=max(step.attempt - 1, 0),
                        lease_token="", lease_until=None)
        uow.event("step_queued", step.node_id, step, visit=step.visit, queue=step.queue, child=child.pk,
                  child_status=str(child.status))
        uow.dispatch(step)
        return
    error = child.error or {}
    reason = error.get("message") or child.halt_reason or str(child.status)
    fail_attempt(uow, step, claim, StepError(
        f"sub-workflow instance {child.pk} {child.status}: {reason}",
        permanent=child.status == InstanceStatus.CANCELLED,
        details={"code": f"child_{child.status}", "child": child.pk, "child_status": str(child.status)}))


def waits_on_child(step: StepRun) -> bool:
    """A pending subworkflow step whose latest child still runs (not one a halt parked before it
    started a child, or after its child ended)."""
    if step.node_type not in child_kinds() or step.pk is None:
        return False
    latest = WorkflowInstance.objects.filter(parent_step_id=step.pk).order_by("-id").values_list(
        "status", flat=True).first()
    return latest is not None and latest in CHILD_ALIVE


def other_waiting(uow: UnitOfWork, step: StepRun) -> bool:
    """Whether anything but `step` keeps the instance waiting: a human task, or a sub-workflow step
    whose child runs."""
    pending = [s for s in steps_of(uow, [StepStatus.PENDING], parked_only=True) if s.pk != step.pk]
    persons = person_kinds()
    return any(s.node_type in persons or waits_on_child(s) for s in pending)


# --- After commits: effects, and the reconciler's backstop -------------------------------------

def settle_parent_step(step_id: int, now: datetime | None = None) -> bool:
    """Settle a parked subworkflow step whose latest child ended, in its own transaction. False
    when there is nothing to do (already settled, the child still runs, the parent is halted: it
    is settled once an operator resumes it, by the reconciler)."""
    now = now or clock.now()
    row = StepRun.objects.filter(pk=step_id).values_list("instance_id", flat=True).first()
    if row is None:
        return False
    store = stores.get_store()
    with store.atomic():
        parent = store.lock_instance(row)
        if parent.status not in INSTANCE_ACTIVE:
            return False
        step = store.get_step(step_id)
        if step.status != StepStatus.PENDING or step.due_at is not None:
            return False
        children = children_of(step_id)
        if not children or children[-1].status not in CHILD_ENDED:
            return False
        graph = graph_for_version(parent.version_id)
        node = node_for_step(graph, step.node_id)
        claim = Claim(step=step, instance=parent, graph=graph, node=node, kind=get_kind(node.type), token="",
                      worker="")
        uow = UnitOfWork(parent, graph, now)
        settle(uow, step, claim, children[-1])
        effects.write(store, uow)
    return True


def child_ended(child_id: int) -> None:
    """Post-commit effect of a child's end: settle its parent step."""
    step_id = WorkflowInstance.objects.filter(pk=child_id).values_list("parent_step_id", flat=True).first()
    if step_id is not None:
        settle_parent_step(step_id)


def cancel_children(step_ids: list[int], now: datetime | None = None) -> int:
    """Post-commit effect of cancelled parent steps: cancel their children still alive."""
    alive = WorkflowInstance.objects.filter(parent_step_id__in=step_ids, status__in=CHILD_ALIVE)
    return sum(1 for pk in alive.values_list("pk", flat=True)
               if cancel_instance(pk, "its parent step was cancelled", now=now))


def compensate_children(step_ids: list[int], now: datetime | None = None) -> int:
    """Post-commit effect of a parent starting its compensation: each child its succeeded steps
    completed runs its own compensations (completed -> compensating -> compensated)."""
    now = now or clock.now()
    store = stores.get_store()
    started = 0
    for pk in WorkflowInstance.objects.filter(parent_step_id__in=step_ids, status=InstanceStatus.COMPLETED) \
            .values_list("pk", flat=True):
        with store.atomic():
            child = store.lock_instance(pk)
            if child.status != InstanceStatus.COMPLETED:
                continue
            uow = UnitOfWork(child, graph_for_version(child.version_id), now)
            if start_compensation(uow):
                effects.write(store, uow)
                started += 1
    return started


def reconcile(now: datetime) -> int:
    """The reconciler's pass: parked subworkflow steps whose latest child ended are settled (an
    effect lost with its process), and children whose parent step is no longer open are cancelled."""
    ended = (StepRun.objects.filter(status=StepStatus.PENDING, node_type__in=child_kinds(), due_at__isnull=True,
                                    instance__status__in=INSTANCE_ACTIVE, child_instances__status__in=CHILD_ENDED)
             .exclude(child_instances__status__in=CHILD_ALIVE).values_list("pk", flat=True).distinct()[:BATCH])
    done = sum(1 for pk in list(ended) if settle_parent_step(pk, now))
    orphans = (WorkflowInstance.objects.filter(status__in=CHILD_ALIVE, parent_step__isnull=False)
               .exclude(parent_step__status__in=[StepStatus.PENDING, StepStatus.QUEUED, StepStatus.RUNNING,
                                                 StepStatus.RETRYING])
               .values_list("parent_step_id", flat=True)[:BATCH])
    step_ids = sorted({pk for pk in orphans if pk is not None})
    if step_ids:
        done += cancel_children(step_ids, now)
    return done


# The post-commit effects stopping.py and compensation.py record by name (runtime/effects.py).
effects.register("child_ended", child_ended)
effects.register("cancel_children", cancel_children)
effects.register("compensate_children", compensate_children)
