"""Carrying on after a halt, as an operator decided in review: parked steps queued again and the
held-back activations started, or (a reroute) the open work cancelled and the chosen node started.

A decision on a locked instance, recorded into its UnitOfWork (never written here).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from workflows.engine.scheduling import joins_for_reroute
from workflows.engine.statuses import STEP_OPEN, InstanceStatus, StepStatus
from workflows.runtime import subflows
from workflows.runtime.activation import activate, release_throttled
from workflows.runtime.config import child_kinds, conf, person_kinds
from workflows.runtime.decided_steps import steps_of
from workflows.runtime.unit import UnitOfWork


def resume(uow: UnitOfWork, *, goto: str | None = None, note: str = "") -> None:
    """Carry on after a halt: unpark parked steps and start what was held back, or (with `goto`)
    drop both and start the chosen node instead."""
    inst = uow.instance
    state = inst.state
    abandoned: dict[str, list[str]] = {}
    held = list(state.pop("resume", {}).get("activate", []))
    throttled = {(node_id, visit) for node_id, visit in state.get("throttled", [])}
    # A human task keeps waiting for its person, a sub-workflow step for its child while it runs; a
    # sub-workflow step that a halt parked (queued, retrying) or whose child ended meanwhile goes on.
    pending = steps_of(uow, [StepStatus.PENDING], exclude_types=person_kinds(), parked_only=True)
    parked = [step for step in pending
              if (step.node_id, step.visit) not in throttled and not subflows.waits_on_child(step)]
    # An llm step waiting for its tool steps is queued by the last of them, not by a resume.
    awaiting_tools = [step for step in parked
                      if isinstance(step.output, dict) and step.output.get("waiting_for_tools")]
    if goto is None:
        parked = [step for step in parked if not any(step is w for w in awaiting_tools)]
    if goto is not None:
        # The steps held back by max_concurrency belong to the abandoned path too (an llm step's
        # tool calls with it): cancelled with the rest, and off the held list, never released.
        parked += [step for step in pending if (step.node_id, step.visit) in throttled]
        if "throttled" in state:
            state["throttled"] = []
        for step in parked:
            uow.update_step(step, status=StepStatus.CANCELLED, finished_at=uow.now)
            uow.event("step_cancelled", step.node_id, step, reason=f"rerouted to {goto}")
        uow.set_instance(open_steps=inst.open_steps - len(parked))
        # The joins after the chosen node stop waiting for the abandoned branches (dead-path
        # elimination); those still open (a human task, a running step) resolve their inputs later.
        live = {step.node_id for step in steps_of(uow, STEP_OPEN) if step.node_id in uow.graph.nodes}
        state["joins"], abandoned = joins_for_reroute(uow.graph, goto, state.get("joins") or {}, live)
        held = [goto]
    else:
        for step in parked:
            uow.update_step(step, status=StepStatus.QUEUED, due_at=uow.now)
            uow.event("step_queued", step.node_id, step, visit=step.visit, queue=step.queue, resumed=True)
            uow.dispatch(step)
    if state.get("compensation", {}).get("active"):
        # Halted during compensation (compensation_failed): carry on compensating.
        uow.set_instance(status=InstanceStatus.COMPENSATING, halt_reason="", error=None, state=state)
        uow.event("instance_resumed", compensation=True, unparked=[s.node_id for s in parked], note=note)
        return
    waiting = bool(steps_of(uow, [StepStatus.PENDING], node_types=person_kinds())) or any(
        subflows.waits_on_child(step)
        for step in steps_of(uow, [StepStatus.PENDING], node_types=list(child_kinds()), parked_only=True))
    uow.set_instance(status=InstanceStatus.WAITING if waiting else InstanceStatus.RUNNING, halt_reason="",
                     error=None, state=state)
    if inst.deadline and inst.deadline <= uow.now:
        ttl = uow.graph.settings.ttl_s or conf("DEFAULT_TTL_S")
        uow.set_instance(deadline=uow.now + timedelta(seconds=ttl))
    rerouted: dict[str, Any] = {"abandoned_inputs": abandoned} if goto else {}
    uow.event("instance_resumed", goto=goto, activate=held, unparked=[s.node_id for s in parked] if not goto else [],
              note=note, **rerouted)
    activate(uow, held, after=goto or "")
    release_throttled(uow)
