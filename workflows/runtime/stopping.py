"""How an instance stops, for good or for an operator: the end (completed, failed, cancelled, with
compensation after a failure), halting into the review queue (queued work parked), and the TTL.

Decisions on a locked instance, recorded into its UnitOfWork (never written here). Resuming after a
halt is resuming.py.
"""

from __future__ import annotations

from typing import Any

from workflows.engine.statuses import STEP_OPEN, InstanceStatus, StepStatus
from workflows.models import ReviewItem, StepRun
from workflows.runtime.compensation import start_compensation
from workflows.runtime.config import child_kinds, conf
from workflows.runtime.decided_steps import steps_of
from workflows.runtime.unit import UnitOfWork


def cancel_open_steps(uow: UnitOfWork, reason: str) -> None:
    waiting_on_children = []
    for step in steps_of(uow, STEP_OPEN):
        uow.update_step(step, status=StepStatus.CANCELLED, finished_at=uow.now, lease_token="", lease_until=None)
        uow.event("step_cancelled", step.node_id, step, reason=reason)
        if step.node_type in child_kinds() and step.pk is not None:
            waiting_on_children.append(step.pk)
    if waiting_on_children:
        # A cancelled sub-workflow step cancels its child (after this commit; the reconciler too).
        uow.after_commit("cancel_children", waiting_on_children)
    if uow.instance.state.pop("throttled", None) is not None:
        uow.set_instance(state=uow.instance.state)
    uow.set_instance(open_steps=0)


def finish_instance(uow: UnitOfWork, status: str, reason: str, error: dict[str, Any] | None) -> None:
    uow.set_instance(status=status, halt_reason=reason, error=error, finished_at=uow.now)
    uow.event(f"instance_{status}", reason=reason, error=error)
    if uow.instance.parent_step_id is not None:
        # A sub-workflow's end settles the parent step that waits for it (after this commit; the
        # reconciler repeats it if this process dies first).
        uow.after_commit("child_ended", uow.instance.pk)
    # Nothing is left to decide on an instance that ended.
    uow.close_reviews = True


def stop_instance(uow: UnitOfWork, status: str, reason: str, error: dict[str, Any]) -> None:
    """Stop an instance early (failure, loop breaker, TTL): open steps are cancelled, state kept."""
    cancel_open_steps(uow, reason)
    finish_instance(uow, status, reason, error)


def fail_for_good(uow: UnitOfWork, reason: str, error: dict[str, Any]) -> None:
    stop_instance(uow, InstanceStatus.FAILED, reason, error)
    start_compensation(uow)


def halt(uow: UnitOfWork, reason: str, details: dict[str, Any], *, resume_activations: list[str] | None = None,
         step: StepRun | None = None, abandon_running: bool = False) -> None:
    """Halt into the review queue. Completed steps and context stay; queued work is parked.

    Running steps finish and commit (their successors wait with the rest), unless `abandon_running`
    (TTL): then their leases are revoked and whatever they return is discarded.
    """
    inst = uow.instance
    parkable = [StepStatus.QUEUED, StepStatus.RETRYING] + ([StepStatus.RUNNING] if abandon_running else [])
    parked = steps_of(uow, parkable)
    for parked_step in parked:
        uow.update_step(parked_step, status=StepStatus.PENDING, due_at=None, lease_token="", lease_until=None)
    state = inst.state
    resume = state.setdefault("resume", {})
    resume.setdefault("activate", []).extend(resume_activations or [])
    uow.set_instance(status=InstanceStatus.HALTED, halt_reason=reason, error=details, state=state)
    item = uow.open_review(ReviewItem(instance_id=inst.pk, step=step, node_id=str(details.get("node", "")),
                                      reason=reason, details=details, created_at=uow.now))
    uow.event("instance_halted", review=item, reason=reason, details=details,
              parked=[s.node_id for s in parked])


def expire(uow: UnitOfWork) -> None:
    inst = uow.instance
    details = {"message": f"the instance passed its deadline {inst.deadline.isoformat() if inst.deadline else ''}",
               "deadline": inst.deadline.isoformat() if inst.deadline else None}
    if conf("TTL_ACTION") == "fail":
        fail_for_good(uow, "ttl_expired", details)
    else:
        # Its running step is abandoned: nothing waits forever on a step past the deadline.
        halt(uow, "ttl_expired", details, abandon_running=True)
