"""The saga: after a failure, undo the completed steps that declare `compensate`, newest first, one
at a time (each a `compensate:<node>` step); the children sub-workflow steps completed compensate too.

Decisions on a locked instance, recorded into its UnitOfWork (never written here).
"""

from __future__ import annotations

from workflows import store as stores
from workflows.engine.nodes import get_kind
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.models import StepRun
from workflows.runtime.config import COMPENSATE_PREFIX, child_kinds, compensation_node, is_compensation, queue_for
from workflows.runtime.decided_steps import steps_of
from workflows.runtime.unit import UnitOfWork


def start_compensation(uow: UnitOfWork) -> bool:
    """Undo the completed steps that declare `compensate`, newest first, one at a time.

    Returns False (the instance stays failed) when there is nothing to compensate."""
    inst = uow.instance
    nodes = uow.graph.nodes
    succeeded = steps_of(uow, [StepStatus.SUCCEEDED])
    parents = [step.pk for step in succeeded if step.node_type in child_kinds() and step.pk is not None]
    if parents:
        # The children these steps completed compensate too (their own `compensate` actions), after
        # this commit and alongside this instance's compensations; docs/graph-format.md, Sub-workflows.
        uow.after_commit("compensate_children", parents)
    done = [step for step in succeeded
            if not is_compensation(step.node_id) and step.node_id in nodes and nodes[step.node_id].compensate]
    # Newest first: the saga undoes the steps in the reverse order of their completion.
    done.sort(key=lambda step: (step.finished_at or uow.now, step.pk or 0), reverse=True)
    todo = [step.pk for step in done]
    if not todo:
        return False
    state = inst.state
    state["compensation"] = {"active": True, "todo": todo}
    uow.set_instance(status=InstanceStatus.COMPENSATING, state=state)
    uow.event("compensation_started", steps=todo)
    compensate_next(uow)
    return True


def compensate_next(uow: UnitOfWork, done: StepRun | None = None) -> None:
    inst = uow.instance
    state = inst.state
    comp = state.setdefault("compensation", {"active": True, "todo": []})
    store = stores.get_store()
    if done is not None:
        original = store.get_step(comp.get("current"))
        uow.update_step(original, status=StepStatus.COMPENSATED)
        uow.event("step_compensated", done.node_id[len(COMPENSATE_PREFIX):], None, step_id=original.pk)
    if not comp["todo"]:
        comp["active"] = False
        comp.pop("current", None)
        uow.set_instance(state=state, status=InstanceStatus.COMPENSATED, finished_at=uow.now)
        uow.event("instance_compensated")
        return
    original = store.get_step(comp["todo"].pop(0))
    comp["current"] = original.pk
    node = compensation_node(uow.graph.nodes[original.node_id])
    assert node is not None
    kind = get_kind(node.type)
    step = uow.add_step(StepRun(
        instance_id=inst.pk, node_id=node.id, node_type=node.type, visit=original.visit,
        queue=queue_for(node, kind), idempotency_key=f"{inst.pk}:{node.id}:{original.visit}",
        trace_id=inst.trace_id, created_at=uow.now, due_at=uow.now, status=StepStatus.QUEUED))
    uow.set_instance(state=state)
    uow.event("step_queued", node.id, step, visit=step.visit, queue=step.queue, compensates=original.node_id)
    uow.dispatch(step)
