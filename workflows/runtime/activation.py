"""Moving an instance on: a finished step's edges (conditions, joins via engine/scheduling), the
nodes they activate as new steps (the loop breaker first, `max_concurrency` holding the excess back
until `release_throttled` lets it out), human tasks, the budget check, and the instance's end when
nothing is left.

Decisions on a locked instance, recorded into its UnitOfWork (never written here). Each function
takes the unit of the transition in progress: the instance as locked, the graph, the time.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from workflows.engine import expressions
from workflows.engine.errors import ExpressionError
from workflows.engine.graph import Edge, Graph, Node
from workflows.engine.nodes import get_kind
from workflows.engine.priorities import queue_name
from workflows.engine.scheduling import advance, count_activations, edges_fired
from workflows.engine.statuses import INSTANCE_ACTIVE, InstanceStatus, StepStatus
from workflows.models import ReviewItem, StepRun, WorkflowInstance
from workflows.runtime.config import TRAIL_LENGTH, conf, is_compensation, queue_for
from workflows.runtime.decided_steps import ACTIVE, steps_of
from workflows.runtime.records import Claim, StepOutputs
from workflows.runtime.stopping import fail_for_good, finish_instance, halt
from workflows.runtime.unit import UnitOfWork


def may_run(instance: WorkflowInstance, node_id: str) -> bool:
    if is_compensation(node_id):
        return bool(instance.status == InstanceStatus.COMPENSATING)
    return instance.status in INSTANCE_ACTIVE


def holds(names: Mapping[str, Any], edge: Edge) -> bool:
    """An edge's condition; an error names the edge. Bounded by the evaluation budget
    (workflows/engine/expression_limits.py), which is what makes evaluating it under the instance
    lock acceptable: it costs at most MAX_STEPS steps, never an unbounded time or allocation."""
    try:
        return bool(expressions.evaluate(edge.when or "", names))
    except ExpressionError as exc:
        raise type(exc)(f"the condition of edge {edge.index + 1} ({edge.label}) failed: {exc}") from None


def fired_edges(uow: UnitOfWork, node_id: str, output: Any) -> dict[int, bool]:
    inst = uow.instance
    names = expressions.condition_names(output, inst.context, StepOutputs(inst.pk), inst.input)
    return edges_fired(uow.graph, node_id, lambda edge: holds(names, edge))


def start_edges(graph: Graph, start_input: dict[str, Any]) -> dict[int, bool]:
    """The start node's outgoing conditions for a new instance, decided before its transaction:
    they read only the input (the context is the input; no step has an output yet). Raises
    ExpressionError naming the edge (a 400 at start)."""
    names = expressions.condition_names(start_input, dict(start_input), {}, start_input)
    return edges_fired(graph, graph.start_node, lambda edge: holds(names, edge))


def new_step(uow: UnitOfWork, node_id: str, *, claim_for: str | None = None, token: str = "",
             park: bool = False, throttled: bool = False) -> StepRun:
    """Activate a node: a new visit, queued (or already claimed by this worker for inline running)."""
    node = uow.graph.nodes[node_id]
    kind = get_kind(node.type)
    inst = uow.instance
    visits = inst.state.setdefault("visits", {})
    visit = visits.get(node_id, 0) + 1
    visits[node_id] = visit
    # The last activations, in order: what a loop-breaker halt shows as the path that looped.
    trail = inst.state.setdefault("trail", [])
    trail.append(node_id)
    del trail[:-TRAIL_LENGTH]
    step = StepRun(
        instance_id=inst.pk, node_id=node_id, node_type=node.type, visit=visit, queue=queue_for(node, kind),
        idempotency_key=f"{inst.pk}:{node_id}:{visit}", trace_id=inst.trace_id, created_at=uow.now,
        due_at=uow.now, status=StepStatus.QUEUED, priority=node.priority or inst.priority,
    )
    if kind.structural:
        step.status = StepStatus.SUCCEEDED
        step.started_at = step.finished_at = uow.now
        step.attempt = 1
    elif park:
        step.status = StepStatus.PENDING
        step.due_at = None
    elif claim_for:
        step.status = StepStatus.RUNNING
        step.attempt = 1
        step.worker = claim_for
        step.lease_token = token
        step.started_at = step.heartbeat_at = uow.now
        step.lease_until = uow.now + timedelta(seconds=conf("LEASE_S"))
    uow.add_step(step)
    if kind.structural:
        uow.event("step_succeeded", node_id, step, visit=visit, structural=True)
    elif throttled:
        uow.event("step_pending", node_id, step, visit=visit, throttled=True)
    elif park:
        uow.event("step_pending", node_id, step, visit=visit)
    elif claim_for:
        uow.event("step_started", node_id, step, visit=visit, attempt=1, worker=claim_for, queue=step.queue)
    else:
        uow.event("step_queued", node_id, step, visit=visit, queue=step.queue)
        uow.dispatch(step)
    return step


def budget_exceeded(inst: WorkflowInstance) -> dict[str, Any] | None:
    """Past its cost or token budget, an instance halts before anything else starts."""
    if inst.budget_usd is not None and Decimal(inst.cost_usd) > Decimal(inst.budget_usd):
        return {"message": f"cost ${Decimal(inst.cost_usd):.6f} passed the budget of ${inst.budget_usd}",
                "cost_usd": float(inst.cost_usd), "budget_usd": float(inst.budget_usd), "tokens": inst.tokens}
    budget_tokens = inst.state.get("budget_tokens")
    if budget_tokens is not None and inst.tokens > budget_tokens:
        return {"message": f"{inst.tokens} tokens passed the budget of {budget_tokens}",
                "tokens": inst.tokens, "budget_tokens": budget_tokens, "cost_usd": float(inst.cost_usd)}
    return None


def resolve(uow: UnitOfWork, step: StepRun, fired: dict[int, bool], *, inline_queue: str | None = None,
            worker: str = "", hold: dict[str, Any] | None = None) -> Claim | None:
    """Apply the scheduling decision for a finished step: skips, activations, loop breaker, end.

    With `hold` (a budget overrun), the activations are kept for when an operator resumes."""
    inst = uow.instance
    state = inst.state
    decision = advance(uow.graph, state.setdefault("joins", {}), step.node_id, fired)
    uow.set_instance(state=state)
    for node_id in decision.skipped:
        uow.event("node_skipped", node_id)
    if decision.fired_edges:
        # The edges ride on the step's own step_succeeded event when this unit wrote it (one event
        # row fewer per step); a step that succeeded in an earlier unit gets an edges_taken event.
        succeeded = uow.succeeded_event(step)
        if succeeded is not None:
            succeeded.payload["edges"] = decision.fired_edges
        else:
            uow.event("edges_taken", step.node_id, step, edges=decision.fired_edges)

    if inst.status == InstanceStatus.HALTED:
        # A step that was already running when the instance halted: its result stands, and what it
        # activates waits for the operator's decision with the rest.
        state.setdefault("resume", {}).setdefault("activate", []).extend(decision.activate)
        return None
    if hold is not None:
        halt(uow, "budget_exceeded", {**hold, "node": step.node_id}, resume_activations=decision.activate)
        return None
    return activate(uow, decision.activate, inline_queue=inline_queue, worker=worker, after=step.node_id)


def activate(uow: UnitOfWork, nodes: list[str], *, inline_queue: str | None = None, worker: str = "",
             after: str = "") -> Claim | None:
    """Start the given nodes (loop breaker first), then complete the instance if nothing is left."""
    inst = uow.instance
    graph = uow.graph
    state = inst.state
    check = count_activations(inst.loop_count, len(nodes), inst.max_transitions)
    if not check.allowed:
        halt(uow, "loop_breaker",
             {"message": f"more than {inst.max_transitions} node activations (max_transitions)",
              "max_transitions": inst.max_transitions, "next": nodes,
              "path": list(state.get("trail", []))}, resume_activations=nodes)
        return None
    uow.set_instance(loop_count=check.loop_count)

    inline: Claim | None = None
    candidates = [n for n in nodes if not get_kind(graph.nodes[n].type).structural]
    limit = graph.settings.max_concurrency
    active = len(steps_of(uow, ACTIVE)) if limit else 0
    # Ready branches longest remaining path first: their steps get ids, queue places and (with
    # max_concurrency) slots in that order, so with few workers the critical path starts first.
    for node_id in graph.critical_first(nodes):
        node = graph.nodes[node_id]
        kind = get_kind(node.type)
        if kind.structural:
            new_step(uow, node_id)
            if node.type == "end":
                state["ended"] = node_id
            continue
        if kind.awaits_person:
            open_human_task(uow, node)
            continue
        if limit and active >= limit:
            # max_concurrency: the step waits (pending, no due time) until a running one finishes.
            held = new_step(uow, node_id, park=True, throttled=True)
            state.setdefault("throttled", []).append([node_id, held.visit])
            uow.set_instance(open_steps=inst.open_steps + 1)
            continue
        active += 1
        # The same RQ queue: the same kind at the same priority (a successor at another priority
        # waits its turn on its own queue).
        claim_inline = (inline_queue is not None and len(candidates) == 1 and not kind.is_async
                        and queue_name(queue_for(node, kind), node.priority or inst.priority) == inline_queue)
        token = secrets.token_hex(8) if claim_inline else ""
        step = new_step(uow, node_id, claim_for=worker if claim_inline else None, token=token)
        uow.set_instance(open_steps=inst.open_steps + 1)
        if claim_inline:
            inline = Claim(step=step, instance=inst, graph=graph, node=node, kind=kind, token=token, worker=worker,
                           fresh=True)
    uow.set_instance(state=state)

    if inst.open_steps == 0:
        if state.get("ended"):
            finish_instance(uow, InstanceStatus.COMPLETED, "", None)
        else:
            fail_for_good(uow, "dead_end", {
                "message": f"node '{after}' finished and no path leads on: none of its outgoing "
                           "conditions held and no other step is running", "node": after})
    return inline


def release_throttled(uow: UnitOfWork) -> None:
    """max_concurrency: queue the steps held back, oldest first, while fewer than the limit are active."""
    inst = uow.instance
    held = inst.state.get("throttled")
    limit = uow.graph.settings.max_concurrency
    if not held or not limit or inst.status not in (InstanceStatus.RUNNING, InstanceStatus.WAITING):
        return
    active = len(steps_of(uow, ACTIVE))
    if active >= limit:
        return
    waiting = {(s.node_id, s.visit): s for s in steps_of(uow, [StepStatus.PENDING], parked_only=True)}
    while held and active < limit:
        node_id, visit = held.pop(0)
        step = waiting.get((node_id, visit))
        if step is None:
            continue  # cancelled or rerouted meanwhile
        uow.update_step(step, status=StepStatus.QUEUED, due_at=uow.now)
        uow.event("step_queued", step.node_id, step, visit=step.visit, queue=step.queue, throttled=True)
        uow.dispatch(step)
        active += 1
    uow.set_instance(state=inst.state)


def open_human_task(uow: UnitOfWork, node: Node) -> None:
    """A human node: its step waits (pending, no due time) for an answer in the review queue."""
    inst = uow.instance
    step = new_step(uow, node.id, park=True)
    uow.set_instance(open_steps=inst.open_steps + 1)
    names = {"context": inst.context, "steps": StepOutputs(inst.pk), "input": inst.input}
    try:
        prompt = expressions.render(node.config.get("prompt", ""), names)
    except ExpressionError as exc:
        prompt = f"{node.config.get('prompt', '')} (template failed: {exc})"
    item = uow.open_review(ReviewItem(
        instance_id=inst.pk, step=step, node_id=node.id, reason="human_task",
        assignee_group=node.config.get("assignee_group", "operators"), created_at=uow.now,
        details={"prompt": prompt, "inputs": node.config.get("inputs") or {}}))
    if inst.status == InstanceStatus.RUNNING:
        uow.set_instance(status=InstanceStatus.WAITING)
    uow.event("human_task_opened", node.id, step, review=item, prompt=prompt)
