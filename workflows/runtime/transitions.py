"""The runtime's decisions on a locked instance, recorded into a UnitOfWork (never written here).

Each function takes the unit of the transition in progress: the instance as locked, the graph, the
time. Reads of other rows (steps to park, to cancel, to compensate) go through the store.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

from workflows import store as stores
from workflows.engine import expressions
from workflows.engine.errors import ExpressionError, StepError
from workflows.engine.graph import Edge, Graph, Node
from workflows.engine.nodes import get_kind
from workflows.engine.priorities import queue_name
from workflows.engine.retry import RetryPolicy
from workflows.engine.scheduling import advance, count_activations, edges_fired
from workflows.engine.secrets import SecretScope
from workflows.engine.statuses import INSTANCE_ACTIVE, STEP_OPEN, InstanceStatus, StepStatus
from workflows.models import ReviewItem, StepRun, WorkflowInstance
from workflows.runtime.config import (
    COMPENSATE_PREFIX,
    TRAIL_LENGTH,
    compensation_node,
    conf,
    is_compensation,
    person_kinds,
    queue_for,
)
from workflows.runtime.records import Claim, StepOutputs
from workflows.runtime.unit import UnitOfWork

# Steps that count against max_concurrency.
ACTIVE = (StepStatus.QUEUED, StepStatus.RUNNING, StepStatus.RETRYING)
_SECRET_HEADER_WORDS = ("authorization", "key", "token", "secret", "password", "cookie")


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


def redacted_input(claim: Claim) -> dict[str, Any] | None:
    if claim.call is None:
        # Not run here (a lost lease, a sub-workflow's end): keep what the step recorded.
        kept: dict[str, Any] | None = claim.step.input
        return kept
    return redacted_config(claim.call.config, claim.call.secrets)


def redacted_config(rendered: dict[str, Any], scope: SecretScope | None) -> dict[str, Any]:
    """A rendered config as a record or a page may show it: secret references as
    `{{ secrets.NAME }}`, never values (engine/secrets.py), and secret-looking headers masked."""
    config = dict(scope.masked(rendered) if scope is not None else rendered)
    if isinstance(config.get("headers"), dict):
        config["headers"] = {
            k: ("***" if any(word in k.lower() for word in _SECRET_HEADER_WORDS) else v)
            for k, v in config["headers"].items()
        }
    return config


# --- New steps ------------------------------------------------------------------------------------

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


# --- After a step succeeded ----------------------------------------------------------------------

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


# --- After a step failed -------------------------------------------------------------------------

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


# --- Stopping, halting, resuming -----------------------------------------------------------------

def steps_of(uow: UnitOfWork, statuses: Iterable[str], *, node_types: Iterable[str] | None = None,
             exclude_types: Iterable[str] | None = None, parked_only: bool = False) -> list[StepRun]:
    """The instance's steps in these statuses, as this transition has decided them so far."""
    statuses = frozenset(statuses)
    types = frozenset(node_types) if node_types is not None else None
    excluded = frozenset(exclude_types or ())

    def keep(step: StepRun) -> bool:
        return (step.status in statuses and (types is None or step.node_type in types)
                and step.node_type not in excluded and (not parked_only or step.due_at is None))

    loaded = stores.get_store().steps_of(uow.instance.pk, statuses, node_types=node_types,
                                         exclude_types=exclude_types, parked_only=parked_only)
    return uow.as_decided(loaded, keep)


def cancel_open_steps(uow: UnitOfWork, reason: str) -> None:
    from workflows.runtime import subflows

    waiting_on_children = []
    for step in steps_of(uow, STEP_OPEN):
        uow.update_step(step, status=StepStatus.CANCELLED, finished_at=uow.now, lease_token="", lease_until=None)
        uow.event("step_cancelled", step.node_id, step, reason=reason)
        if step.node_type in subflows.child_kinds() and step.pk is not None:
            waiting_on_children.append(step.pk)
    if waiting_on_children:
        # A cancelled sub-workflow step cancels its child (after this commit; the reconciler too).
        uow.after_commit("cancel_children", subflows.cancel_children, waiting_on_children)
    if uow.instance.state.pop("throttled", None) is not None:
        uow.set_instance(state=uow.instance.state)
    uow.set_instance(open_steps=0)


def finish_instance(uow: UnitOfWork, status: str, reason: str, error: dict[str, Any] | None) -> None:
    uow.set_instance(status=status, halt_reason=reason, error=error, finished_at=uow.now)
    uow.event(f"instance_{status}", reason=reason, error=error)
    if uow.instance.parent_step_id is not None:
        from workflows.runtime import subflows

        # A sub-workflow's end settles the parent step that waits for it (after this commit; the
        # reconciler repeats it if this process dies first).
        uow.after_commit("child_ended", subflows.child_ended, uow.instance.pk)
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


def resume(uow: UnitOfWork, *, goto: str | None = None, note: str = "") -> None:
    """Carry on after a halt: unpark parked steps and start what was held back, or (with `goto`)
    drop both and start the chosen node instead."""
    inst = uow.instance
    state = inst.state
    held = list(state.pop("resume", {}).get("activate", []))
    throttled = {(node_id, visit) for node_id, visit in state.get("throttled", [])}
    from workflows.runtime import subflows

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
        state["joins"] = {}
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
        for step in steps_of(uow, [StepStatus.PENDING], node_types=list(subflows.child_kinds()), parked_only=True))
    uow.set_instance(status=InstanceStatus.WAITING if waiting else InstanceStatus.RUNNING, halt_reason="",
                     error=None, state=state)
    if inst.deadline and inst.deadline <= uow.now:
        ttl = uow.graph.settings.ttl_s or conf("DEFAULT_TTL_S")
        uow.set_instance(deadline=uow.now + timedelta(seconds=ttl))
    uow.event("instance_resumed", goto=goto, activate=held, unparked=[s.node_id for s in parked] if not goto else [],
              note=note)
    activate(uow, held, after=goto or "")
    release_throttled(uow)


def expire(uow: UnitOfWork) -> None:
    inst = uow.instance
    details = {"message": f"the instance passed its deadline {inst.deadline.isoformat() if inst.deadline else ''}",
               "deadline": inst.deadline.isoformat() if inst.deadline else None}
    if conf("TTL_ACTION") == "fail":
        fail_for_good(uow, "ttl_expired", details)
    else:
        # Its running step is abandoned: nothing waits forever on a step past the deadline.
        halt(uow, "ttl_expired", details, abandon_running=True)


# --- Compensation (saga) ------------------------------------------------------------------------

def start_compensation(uow: UnitOfWork) -> bool:
    """Undo the completed steps that declare `compensate`, newest first, one at a time.

    Returns False (the instance stays failed) when there is nothing to compensate."""
    inst = uow.instance
    nodes = uow.graph.nodes
    succeeded = steps_of(uow, [StepStatus.SUCCEEDED])
    from workflows.runtime import subflows

    parents = [step.pk for step in succeeded if step.node_type in subflows.child_kinds() and step.pk is not None]
    if parents:
        # The children these steps completed compensate too (their own `compensate` actions), after
        # this commit and alongside this instance's compensations; README, Sub-workflows.
        uow.after_commit("compensate_children", subflows.compensate_children, parents)
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
