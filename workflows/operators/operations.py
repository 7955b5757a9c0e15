"""Operators' actions on one instance from the instance page: cancel, retry a failed step, and rerun
from a chosen node.

Each action is one transaction on the locked instance row (the same lock every transition takes),
writes its events and a checkpoint through a runtime.UnitOfWork, enqueues after commit, and leaves an
audit entry. Review decisions on halted instances live in workflows/operators/review.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from workflows import clock, runtime
from workflows.engine import scheduling
from workflows.engine.nodes import get_kind
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.models import AuditEntry, Event, StepRun, WorkflowInstance
from workflows.store.state_reads import Rebuilt, creation_context_of, rebuild

OPERATE_PERMISSION = "workflows.operate_workflowinstance"
START_PERMISSION = "workflows.add_workflowinstance"
RERUNNABLE = (InstanceStatus.FAILED, InstanceStatus.CANCELLED, InstanceStatus.COMPLETED)

# Events that (re)activate a node's step, and those after which it will not finish on its own.
_ACTIVATING = ("step_queued", "step_started", "step_pending", "step_parked", "step_waiting", "step_retrying")
_UNFINISHED = ("step_cancelled", "step_failed")


class OperationError(Exception):
    """An action that cannot apply to the instance as it is now. The message says why, for the user."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _actor(user: Any) -> Any:
    return user if getattr(user, "pk", None) else None


def _actor_name(user: Any) -> str:
    return user.get_username() if _actor(user) is not None else "system"


def _snapshot(inst: WorkflowInstance) -> dict[str, Any]:
    return {"status": inst.status, "reason": inst.halt_reason, "open_steps": inst.open_steps,
            "loop_count": inst.loop_count, "context": inst.context}


def _reopen(tr: runtime.UnitOfWork) -> None:
    """Back to running: the stop's reason and error are cleared; an instance past its deadline gets a
    fresh TTL (an operator chose to run it again, as a review approval does)."""
    inst = tr.instance
    state = inst.state
    # Activations held back by an earlier halt belong to that halt, not to this run.
    state.pop("resume", None)
    tr.set_instance(status=InstanceStatus.RUNNING, halt_reason="", error=None, finished_at=None, state=state)
    if inst.deadline and inst.deadline <= tr.now:
        ttl = tr.graph.settings.ttl_s or runtime.conf("DEFAULT_TTL_S")
        tr.set_instance(deadline=tr.now + timedelta(seconds=ttl))


def _cut_short(inst: WorkflowInstance) -> list[StepRun]:
    """Steps that were still open when the instance stopped: cancelled in the stop's own transaction
    (same finished_at as the instance). Running the instance again must run them again, or the joins
    that wait for them would never complete."""
    if inst.finished_at is None:
        return []
    return list(StepRun.objects.filter(instance=inst, status=StepStatus.CANCELLED, finished_at=inst.finished_at)
                .exclude(node_id__startswith=runtime.COMPENSATE_PREFIX).order_by("id"))


def _audit(inst: WorkflowInstance, user: Any, action: str, before: dict[str, Any], note: str,
           now: datetime, **after: Any) -> None:
    AuditEntry.objects.create(instance=inst, actor=_actor(user), action=action, before=before,
                              after={**_snapshot(inst), **after}, note=note, created_at=now)


def cancel_refusal(user: Any, instance: WorkflowInstance) -> str | None:
    """Why `user` may not cancel `instance`, None when they may: operators cancel any instance; whoever
    may start instances (designers) cancels the ones they started. The functions here act for whoever
    calls them; the endpoints check first (dashboard/api/instance_api.py)."""
    if user is None or not user.is_authenticated:
        return "authentication required"
    if user.has_perm(OPERATE_PERMISSION):
        return None
    if user.has_perm(START_PERMISSION) and instance.created_by_id is not None and instance.created_by_id == user.pk:
        return None
    return (f"permission denied: you need {OPERATE_PERMISSION} (the operators group) to cancel an instance "
            "someone else started")


def may_cancel(user: Any, instance: WorkflowInstance) -> bool:
    return cancel_refusal(user, instance) is None


def cancel(instance_id: int, user: Any = None, note: str = "") -> WorkflowInstance:
    """Cancel a running, waiting or halted instance; its open steps are cancelled."""
    with transaction.atomic():
        inst = WorkflowInstance.objects.select_for_update().get(pk=instance_id)
        before = _snapshot(inst)
        reason = f"cancelled by {_actor_name(user)}" + (f": {note}" if note else "")
        if not runtime.cancel_instance(instance_id, reason=reason):
            raise OperationError(f"instance {instance_id} is {inst.status}: only a running, waiting or halted "
                                 "instance can be cancelled")
        inst.refresh_from_db()
        _audit(inst, user, "cancel", before, note, clock.now())
    return inst


def retry_failed_step(instance_id: int, user: Any = None, *, step_id: int | None = None, note: str = "",
                      now: datetime | None = None) -> StepRun:
    """Run a failed instance's failed step again (one more attempt of the same step run), and run again
    the steps its failure cut short. The instance goes back to running."""
    now = now or clock.now()
    with transaction.atomic():
        inst = runtime.lock(instance_id)
        if inst.status != InstanceStatus.FAILED:
            hint = " (use the review actions)" if inst.status == InstanceStatus.HALTED else ""
            raise OperationError(f"instance {instance_id} is {inst.status}: only a failed instance's failed step "
                                 f"can be retried{hint}")
        failed = StepRun.objects.filter(instance=inst, status=StepStatus.FAILED)
        if step_id is not None:
            failed = failed.filter(pk=step_id)
        step = failed.order_by("-id").first()
        if step is None:
            which = f"step {step_id} is not a failed step of instance {instance_id}" if step_id is not None \
                else f"instance {instance_id} has no failed step (it failed with {inst.halt_reason or 'no reason'})"
            raise OperationError(f"nothing to retry: {which}; rerun from a node instead")
        if StepRun.objects.filter(instance=inst, node_id=step.node_id, visit__gt=step.visit).exists():
            raise OperationError(f"step {step.pk} is not the latest visit of node '{step.node_id}'")
        graph = runtime.graph_for_version(inst.version_id)
        before = _snapshot(inst)
        cut_short = [s for s in _cut_short(inst) if s.node_id in graph.nodes]
        tr = runtime.UnitOfWork(inst, graph, now)
        tr.event("instance_retried", step.node_id, step, status=InstanceStatus.RUNNING, by=_actor_name(user),
                 visit=step.visit, attempts_so_far=step.attempt, rerun=[s.node_id for s in cut_short], note=note)
        _reopen(tr)
        # The same step run again: the claim adds the attempt; its last error stays visible until then.
        tr.update_step(step, status=StepStatus.QUEUED, due_at=now, finished_at=None, lease_token="",
                       lease_until=None)
        tr.event("step_queued", step.node_id, step, visit=step.visit, queue=step.queue, retried=True,
                 by=_actor_name(user))
        tr.dispatch(step)
        tr.set_instance(open_steps=1)
        runtime.activate(tr, [s.node_id for s in cut_short], after=step.node_id)
        _audit(inst, user, "retry_step", before, note, now, step=step.pk, node=step.node_id)
        runtime.apply(tr)
    step.refresh_from_db()
    return step


def rerun_from_node(instance_id: int, node_id: str, user: Any = None, *, note: str = "",
                    now: datetime | None = None) -> StepRun:
    """Run a finished instance again from one node: a new visit of the node with the context restored
    as it was when its latest visit was activated (snapshot plus deltas). Joins downstream of the node count
    the branches that do not pass through it as they resolved the first time, keyed by the join slots
    the scheduler uses (scheduling.joins_for_rerun); steps cut short by the stop (and failed steps off
    the rerun path) run again too."""
    now = now or clock.now()
    with transaction.atomic():
        inst = runtime.lock(instance_id)
        if inst.status not in RERUNNABLE:
            hint = {InstanceStatus.HALTED: "; use the review actions (approve, reroute, reject)",
                    InstanceStatus.RUNNING: "; cancel it first", InstanceStatus.WAITING: "; cancel it first"}
            raise OperationError(f"instance {instance_id} is {inst.status}: only a failed, cancelled or completed "
                                 f"instance can be rerun{hint.get(inst.status, '')}")
        graph = runtime.graph_for_version(inst.version_id)
        node = graph.nodes.get(node_id)
        if node is None:
            raise OperationError(f"node '{node_id}' is not in {inst.version}", status=404)
        if get_kind(node.type).structural:
            raise OperationError(f"node '{node_id}' is a {node.type} node: rerun from a node that does work")
        latest = StepRun.objects.filter(instance=inst, node_id=node_id).order_by("-visit").first()
        if latest is None:
            raise OperationError(f"node '{node_id}' never ran in instance {instance_id}: rerun from a node "
                                 "that ran")
        checkpoint = _checkpoint_at_activation(inst, latest)
        if checkpoint is None:
            raise OperationError(f"no valid checkpoint was found for node '{node_id}' in instance {instance_id}")

        before = _snapshot(inst)
        rerun_path = graph.reachable_from(node_id) | {node_id}
        state = inst.state
        last = _resolutions(inst, scheduling.rerun_deciders(graph, rerun_path))
        state["joins"] = scheduling.joins_for_rerun(graph, rerun_path, state.get("joins") or {}, last)
        if state.get("ended") in rerun_path:
            state.pop("ended")
        again = [s.node_id for s in _cut_short(inst) if s.node_id in graph.nodes and s.node_id not in rerun_path]
        again += [node for node in _failed_latest(inst) if node in graph.nodes and node not in rerun_path]
        again = list(dict.fromkeys(again))

        tr = runtime.UnitOfWork(inst, graph, now)
        tr.event("instance_rerun", node_id, None, status=InstanceStatus.RUNNING, by=_actor_name(user),
                 checkpoint_seq=checkpoint.seq, rerun=again, note=note)
        _reopen(tr)
        tr.set_instance(context=checkpoint.context, state=state, open_steps=0)
        runtime.activate(tr, [node_id, *again], after=node_id)
        _audit(inst, user, "rerun_from", before, note, now, node=node_id, checkpoint_seq=checkpoint.seq)
        runtime.apply(tr)
    new = StepRun.objects.filter(instance_id=instance_id, node_id=node_id).order_by("-visit").first()
    assert new is not None
    return new


def _checkpoint_at_activation(inst: WorkflowInstance, step: StepRun) -> Rebuilt | None:
    """The context as the step was activated: after the transaction that activated it (which holds
    its predecessors' context updates, not its own), rebuilt from the newest valid snapshot at or
    before that seq and the deltas after it (store/state_reads.py)."""
    activated_at = Event.objects.filter(instance=inst, step=step).order_by("seq").values_list("seq", flat=True)
    seq = activated_at.first()
    if seq is None:
        return None
    found = rebuild(inst.pk, creation_context_of(inst), upto=seq)
    found.seq = seq
    return found


def _failed_latest(inst: WorkflowInstance) -> list[str]:
    latest: dict[str, str] = {}
    for node_id, status in (StepRun.objects.filter(instance=inst).exclude(
            node_id__startswith=runtime.COMPENSATE_PREFIX).order_by("visit").values_list("node_id", "status")):
        latest[node_id] = status
    return [node_id for node_id, status in latest.items() if status == StepStatus.FAILED]


def _resolutions(inst: WorkflowInstance, nodes: set[str]) -> dict[str, set[int] | None]:
    """How each node's outgoing edges resolved the last time it ran: the set of edges that fired, or
    None while it had not finished (still open, cancelled or failed)."""
    result: dict[str, set[int] | None] = {}
    events = (Event.objects.filter(instance=inst, node_id__in=nodes)
              .filter(type__in=(*_ACTIVATING, *_UNFINISHED, "step_succeeded", "node_skipped", "edges_taken"))
              .order_by("seq").values_list("node_id", "type", "payload"))
    for node_id, type_, payload in events:
        if type_ in _ACTIVATING or type_ in _UNFINISHED:
            result[node_id] = None
        elif type_ in ("step_succeeded", "node_skipped"):
            # A step's fired edges ride on its step_succeeded event (older logs: an edges_taken after it).
            result[node_id] = {int(i) for i in (payload or {}).get("edges", [])}
        elif type_ == "edges_taken":
            result[node_id] = {int(i) for i in (payload or {}).get("edges", [])}
    return result
