"""Claiming a queued step for a worker: one, or a batch under one lease token.

A step is claimed by a conditional UPDATE (queued -> running with a fresh lease token); where the
store cannot start it at once, the claim checks the locked instance (halted: parked again; stopped:
cancelled; past its deadline: expired) before the step may run. Its outcome commits only while that
token still holds (finishing.py).
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from workflows import clock
from workflows import store as stores
from workflows.engine.nodes import get_kind
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import effects
from workflows.runtime.activation import may_run
from workflows.runtime.config import conf, graph_for_version, node_for_step
from workflows.runtime.records import Claim
from workflows.runtime.step_outcomes import close_step
from workflows.runtime.stopping import expire
from workflows.runtime.unit import UnitOfWork


def claim_step(step_id: int, worker: str, now: datetime | None = None) -> Claim | None:
    """Take a queued step for this worker. None when someone else has it or it is no longer due."""
    now = now or clock.now()
    token = secrets.token_hex(8)
    lease_until = now + timedelta(seconds=conf("LEASE_S"))
    store = stores.get_store()
    fast = store.claim_started(step_id, worker, token, now, lease_until)
    if fast is not None:
        step, instance = fast
        effects.claimed([(instance, [step])])
    else:
        with store.atomic():
            step_or_none = store.claim_queued(step_id, worker, token, now, lease_until)
            if step_or_none is None:
                return None
            step = step_or_none
            instance = store.lock_instance(step.instance_id)
            if not _started(store, step, instance, worker, now):
                return None
    graph = graph_for_version(instance.version_id)
    node = node_for_step(graph, step.node_id)
    # The instance as this claim committed it: the outcome may be written against it directly.
    return Claim(step=step, instance=instance, graph=graph, node=node, kind=get_kind(node.type), token=token,
                 worker=worker, fresh=True)


def claim_steps(step_ids: list[int], worker: str, now: datetime | None = None) -> list[Claim]:
    """Take several queued steps (a batch job's, of one instance; or the ai consumer's jobs, of many)
    under one lease token: one statement where the store can; the steps it could not claim so go
    the general way, one by one. The claims come in the order of `step_ids`; the steps of one
    instance share one instance object."""
    if len(step_ids) == 1:
        single = claim_step(step_ids[0], worker, now)
        return [single] if single is not None else []
    now = now or clock.now()
    token = secrets.token_hex(8)
    store = stores.get_store()
    claims: list[Claim] = []
    groups = store.claim_batch(step_ids, worker, token, now, now + timedelta(seconds=conf("LEASE_S")))
    effects.claimed(groups)
    for instance, steps in groups:
        graph = graph_for_version(instance.version_id)
        for step in steps:
            node = node_for_step(graph, step.node_id)
            claims.append(Claim(step=step, instance=instance, graph=graph, node=node, kind=get_kind(node.type),
                                token=token, worker=worker, fresh=True))
    taken = {claim.step.pk: claim for claim in claims}
    ordered: list[Claim] = []
    for step_id in step_ids:
        claim = taken.get(step_id) or claim_step(step_id, worker, now)
        if claim is not None:
            ordered.append(claim)
    return ordered


def _started(store: Any, step: StepRun, instance: WorkflowInstance, worker: str, now: datetime) -> bool:
    """The claim's checks on the locked instance; False when the step must not run now."""
    uow = UnitOfWork(instance, graph_for_version(instance.version_id), now, checkpoint=False)
    if instance.status == InstanceStatus.HALTED:
        # A job that was already on its queue when the instance halted: park the step again
        # (the claim's attempt is given back) until an operator resumes the instance.
        uow.update_step(step, status=StepStatus.PENDING, due_at=None, lease_token="", lease_until=None,
                        attempt=step.attempt - 1)
        effects.write(store, uow)
        return False
    if not may_run(instance, step.node_id):
        close_step(uow, step, StepStatus.CANCELLED, reason=f"instance is {instance.status}")
        effects.write(store, uow)
        return False
    if instance.deadline and now > instance.deadline:
        uow.checkpoint = True
        expire(uow)
        effects.write(store, uow)
        return False
    uow.event("step_started", step.node_id, step, visit=step.visit, attempt=step.attempt, worker=worker,
              queue=step.queue)
    effects.write(store, uow)
    return True
