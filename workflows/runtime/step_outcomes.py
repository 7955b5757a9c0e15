"""What becomes of a step that did not succeed: a failed attempt (retried by its policy, a poison step
or a failing compensation halted, else the instance fails), a deferral (timers), a cancellation, a
step parked for an operator.

Decisions on a locked instance, recorded into its UnitOfWork (never written here). A success is
activation.resolve.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from workflows.engine.errors import StepError
from workflows.engine.retry import RetryPolicy
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.models import StepRun
from workflows.runtime.config import conf, is_compensation
from workflows.runtime.records import Claim
from workflows.runtime.redaction import redacted_input
from workflows.runtime.stopping import fail_for_good, halt
from workflows.runtime.unit import UnitOfWork


def fail_attempt(uow: UnitOfWork, step: StepRun, claim: Claim, error: StepError) -> None:
    policy = RetryPolicy.from_node(claim.node.retry, conf("DEFAULT_MAX_ATTEMPTS"))
    info = error.as_dict()
    lost_worker = info.get("code") == "lease_expired"
    if lost_worker:
        # A dead worker is not the step's fault: retry it even past the node's attempts, until it has
        # lost POISON_AFTER_LOSSES workers (then it is presumed to be what kills them).
        policy = replace(policy, max_attempts=max(policy.max_attempts, conf("POISON_AFTER_LOSSES")))
    if policy.should_retry(step.attempt, error.permanent):
        delay = policy.delay(step.attempt)
        uow.update_step(step, status=StepStatus.RETRYING, error=info, due_at=uow.now + timedelta(seconds=delay),
                        lease_token="", lease_until=None, input=redacted_input(claim))
        uow.event("step_retrying", step.node_id, step, visit=step.visit, attempt=step.attempt, error=info,
                  retry_in_s=round(delay, 3))
        return
    if lost_worker and uow.instance.status != InstanceStatus.HALTED:
        # A step whose worker died on every attempt (a poison step) would kill workers forever:
        # park it and ask an operator, who may retry it, reroute or reject.
        uow.update_step(step, error=info)
        park_step(uow, step)
        # The error's own fields first: its "message" must not replace the one naming the step.
        halt(uow, "poison_step", {**info, "message": f"step '{step.node_id}' lost its worker on all "
                                  f"{step.attempt} attempt(s)", "node": step.node_id, "attempts": step.attempt},
             step=step)
        return
    if is_compensation(step.node_id):
        # A compensation that keeps failing needs a person: park it, halt, and let an operator retry
        # it or give up (reject).
        uow.update_step(step, error=info, input=redacted_input(claim))
        park_step(uow, step)
        halt(uow, "compensation_failed", {**info, "message": f"compensation {step.node_id} failed: "
                                          f"{error.message}", "node": step.node_id}, step=step)
        return
    uow.update_step(step, status=StepStatus.FAILED, error=info, finished_at=uow.now, lease_token="",
                    lease_until=None, input=redacted_input(claim))
    uow.event("step_failed", step.node_id, step, visit=step.visit, attempt=step.attempt, error=info)
    uow.set_instance(open_steps=uow.instance.open_steps - 1)
    fail_for_good(uow, "step_failed",
                  {**info, "message": f"step '{step.node_id}' failed: {error.message}", "node": step.node_id})


def defer(uow: UnitOfWork, step: StepRun, until: Any) -> None:
    # Not an attempt: the step sleeps until due, then runs again (timers).
    uow.update_step(step, status=StepStatus.PENDING, due_at=until, attempt=step.attempt - 1, lease_token="",
                    lease_until=None)
    uow.event("step_waiting", step.node_id, step, until=until.isoformat())


def close_step(uow: UnitOfWork, step: StepRun, status: str, reason: str) -> None:
    uow.update_step(step, status=status, finished_at=uow.now, lease_token="", lease_until=None)
    uow.set_instance(open_steps=uow.instance.open_steps - 1)
    uow.event(f"step_{status}", step.node_id, step, reason=reason)


def park_step(uow: UnitOfWork, step: StepRun) -> None:
    uow.update_step(step, status=StepStatus.PENDING, due_at=None, lease_token="", lease_until=None)
    uow.event("step_parked", step.node_id, step, visit=step.visit)
