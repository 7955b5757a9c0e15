"""The runtime's side of an llm node's tool calls: rounds committed, tool steps run, results fed back.

See workflows/engine/nodes/llm_tools.py for the design. Here, inside the transaction that commits an
attempt (instance locked, one UnitOfWork):

- `start_round`: the model asked for tools. The round goes into the llm step's `output` (`rounds`,
  `waiting_for_tools`), one child step per valid call is queued (`tool:<node>:<tool>`, its own visit
  counter in `state.tool_visits`, idempotency key `<llm step key>:round<r>:<call id>`, the call's
  arguments and the parent step's id in its `input`), and the llm step waits: pending, no due time,
  its attempt given back (a round is not a failure). Under `max_concurrency` the calls past the free
  slots are held (pending, on `state.throttled`) and queued as active steps finish, as any activation
  is. The loop breaker counts the round's activations: one for the llm step's next attempt, one per
  tool step. Its tokens and cost count at once (the budget halts between rounds).
- `finish_call`: a tool step ended. Its result (or, once its retries are spent, its error) is written
  into its call in the llm step's row; the round's last one queues the llm step again, whose next
  attempt sends the whole conversation (StepCall.tool_rounds). It takes the slot that tool step
  leaves, so max_concurrency holds without holding it back.

A crash anywhere leaves a consistent picture: a round is either committed with its child steps or
not at all (then the attempt is retried and the model asked again for that round only); finished tool
steps are rows that never run again; a lost tool step is retried under the same idempotency key.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from workflows import store as stores
from workflows.engine.graph import Node
from workflows.engine.nodes import NodeResult, get_kind, llm_tools
from workflows.engine.retry import RetryPolicy
from workflows.engine.scheduling import count_activations
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.models import StepRun
from workflows.runtime.activation import budget_exceeded
from workflows.runtime.config import conf, queue_for
from workflows.runtime.decided_steps import ACTIVE, steps_of
from workflows.runtime.records import Claim, Outcome
from workflows.runtime.redaction import redacted_input
from workflows.runtime.step_outcomes import fail_attempt
from workflows.runtime.stopping import halt
from workflows.runtime.unit import UnitOfWork

WAITING = "waiting_for_tools"


def is_tool_step(node_id: str) -> bool:
    return llm_tools.is_tool_step(node_id)


def is_waiting(step: StepRun) -> bool:
    """An llm step parked until its round's tool steps end (resume must not queue it)."""
    return isinstance(step.output, dict) and bool(step.output.get(WAITING)) and step.status == StepStatus.PENDING


def rounds_of(step: StepRun) -> list[dict[str, Any]]:
    """The rounds an llm step has answered so far (its next attempt continues from them)."""
    if step.status == StepStatus.SUCCEEDED or not isinstance(step.output, dict):
        return []
    return list(step.output.get("rounds") or [])


def call_names(step: StepRun) -> dict[str, Any]:
    """What a tool step's templates may read besides context, steps and input: `args`."""
    args = (step.input or {}).get("args") if isinstance(step.input, dict) else None
    return {"args": args if isinstance(args, dict) else {}}


def call_config(step: StepRun, node: Node, config: dict[str, Any]) -> dict[str, Any]:
    """A python tool's function gets the call's arguments as its `args`, an MCP tool as its `arguments`."""
    if node.type == "python":
        return {**config, "args": call_names(step)["args"]}
    if node.type == "mcp":
        return {**config, "arguments": call_names(step)["args"]}
    return config


# --- A round asked for ---------------------------------------------------------------------------

def start_round(uow: UnitOfWork, step: StepRun, claim: Claim, result: NodeResult) -> None:
    inst = uow.instance
    assert result.tool_round is not None and isinstance(result.output, dict)
    output = result.output
    rounds = output["rounds"]
    # The round as stored (scrubbed with the output: finishing._checked), so what the calls' steps,
    # events and ids are made from is what the row keeps.
    rnd = rounds[-1]
    usage = llm_tools.total_usage(rounds[:-1], result.usage or {}) if result.usage else step.usage
    _count_usage(uow, step.usage, usage)

    visits = inst.state.setdefault("tool_visits", {})
    # max_concurrency: the llm step gives its slot up while it waits; the calls take the free slots in
    # the model's order and the rest are held like any activation (activation.release_throttled).
    free = _free_slots(uow, leaving=step)
    queued: list[str] = []
    for call in rnd["calls"]:
        if "error" in call:
            continue  # a call that may not run: its error is its result
        node_id = llm_tools.tool_step_id(step.node_id, call["name"])
        visit = visits.get(node_id, 0) + 1
        visits[node_id] = visit
        call["step_node"], call["visit"] = node_id, visit
        node = llm_tools.tool_node(claim.node, call["name"])
        held = free is not None and free <= 0
        child = uow.add_step(StepRun(
            instance_id=inst.pk, node_id=node_id, node_type=node.type, visit=visit,
            queue=queue_for(node, get_kind(node.type)),
            idempotency_key=f"{step.idempotency_key}:round{rnd['round']}:{call['id']}"[:200],
            trace_id=inst.trace_id, created_at=uow.now, due_at=None if held else uow.now,
            status=StepStatus.PENDING if held else StepStatus.QUEUED,
            input={"tool": call["name"], "call_id": call["id"], "round": rnd["round"], "args": call["args"],
                   "parent_step": step.pk, "parent_node": step.node_id}))
        about = {"visit": visit, "tool_call": call["id"], "parent": step.node_id, "round": rnd["round"]}
        queued.append(node_id)
        if held:
            # Pending with no due time, on the instance's held list (both committed with the round).
            inst.state.setdefault("throttled", []).append([node_id, visit])
            uow.event("step_pending", node_id, child, throttled=True, **about)
            continue
        if free is not None:
            free -= 1
        uow.event("step_queued", node_id, child, queue=child.queue, **about)
        uow.dispatch(child)
    uow.set_instance(open_steps=inst.open_steps + len(queued), state=inst.state)

    fields: dict[str, Any] = {"output": output, "usage": usage, "attempt": step.attempt - 1, "lease_token": "",
                              "lease_until": None, "input": redacted_input(claim), "error": None}
    uow.event("step_waiting", step.node_id, step, visit=step.visit, tool_round=rnd["round"],
              tool_calls=[{"id": c["id"], "name": c["name"], "error": c.get("error")} for c in rnd["calls"]])
    if queued:
        uow.update_step(step, status=StepStatus.PENDING, due_at=None, **fields)
    else:
        # Every call was refused (unknown tool, bad arguments): the errors go straight back.
        output[WAITING] = False
        uow.update_step(step, status=StepStatus.QUEUED, due_at=uow.now, **fields)
        _queue_again(uow, step)

    # The loop breaker counts the round's activations: the llm step's next attempt and each tool step
    # (a call refused at once runs nothing and does not count).
    check = count_activations(inst.loop_count, 1 + len(queued), inst.max_transitions)
    uow.set_instance(loop_count=check.loop_count)
    if not check.allowed:
        halt(uow, "loop_breaker", {
            "message": f"more than {inst.max_transitions} node activations (max_transitions): tool round "
                       f"{rnd['round']} of node '{step.node_id}' ({len(queued)} tool call(s))",
            "node": step.node_id, "max_transitions": inst.max_transitions,
            "path": list(inst.state.get("trail", []))})
        return
    over = budget_exceeded(inst) if usage else None
    if over is not None:
        halt(uow, "budget_exceeded", {**over, "node": step.node_id})


def _free_slots(uow: UnitOfWork, *, leaving: StepRun) -> int | None:
    """max_concurrency: how many more steps may be active (None: no limit), `leaving`'s slot counted free."""
    limit = uow.graph.settings.max_concurrency
    if not limit:
        return None
    return limit - sum(1 for active in steps_of(uow, ACTIVE) if active.pk != leaving.pk)


def _count_usage(uow: UnitOfWork, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
    from decimal import Decimal

    if not after:
        return
    before = before or {}
    tokens = sum(int(after.get(k) or 0) - int(before.get(k) or 0) for k in ("prompt_tokens", "completion_tokens"))
    cost = Decimal(str(after.get("cost_usd") or 0)) - Decimal(str(before.get("cost_usd") or 0))
    inst = uow.instance
    uow.set_instance(tokens=inst.tokens + tokens, cost_usd=Decimal(inst.cost_usd) + cost)


def usage_delta(step: StepRun, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a finishing step's usage adds to the instance: an llm step's earlier rounds were counted
    when they were committed, so only the rest is."""
    if not usage or not step.usage:
        return usage
    delta = dict(usage)
    for key in ("prompt_tokens", "completion_tokens"):
        delta[key] = int(usage.get(key) or 0) - int(step.usage.get(key) or 0)
    delta["cost_usd"] = float(usage.get("cost_usd") or 0) - float(step.usage.get("cost_usd") or 0)
    return delta


# --- A tool step ended ---------------------------------------------------------------------------

def finish_call(uow: UnitOfWork, step: StepRun, claim: Claim, outcome: Outcome) -> None:
    error = outcome.error
    if error is not None:
        policy = RetryPolicy.from_node(claim.node.retry, conf("DEFAULT_MAX_ATTEMPTS"))
        if error.as_dict().get("code") == "lease_expired" or policy.should_retry(step.attempt, error.permanent):
            call_input = step.input
            fail_attempt(uow, step, claim, error)  # retried (or, a poison step, halted)
            # The call's arguments and its parent stay the step's input (not the rendered config).
            uow.update_step(step, input=call_input)
            return
        info = error.as_dict()
        uow.update_step(step, status=StepStatus.FAILED, error=info, finished_at=uow.now, lease_token="",
                        lease_until=None)
        uow.event("step_failed", step.node_id, step, visit=step.visit, attempt=step.attempt, error=info)
        _record(uow, step, {"error": f"the tool failed: {error.message}"})
    else:
        assert outcome.result is not None
        uow.update_step(step, status=StepStatus.SUCCEEDED, output=outcome.result.output, finished_at=uow.now,
                        lease_token="", lease_until=None, error=None)
        uow.event("step_succeeded", step.node_id, step, visit=step.visit, attempt=step.attempt,
                  duration_ms=round((uow.now - step.started_at).total_seconds() * 1000, 2)
                  if step.started_at else None)
        _record(uow, step, {"result": _bounded(outcome.result.output)})
    uow.set_instance(open_steps=uow.instance.open_steps - 1)


def _bounded(value: Any) -> Any:
    text = json.dumps(value, default=str)
    return value if len(text) <= llm_tools.MAX_RESULT_CHARS else text[:llm_tools.MAX_RESULT_CHARS]


def _parent(uow: UnitOfWork, pk: int) -> StepRun | None:
    for change in uow.changes.values():
        if change.step.pk == pk:
            return change.step
    if pk in uow.tracked:
        return uow.tracked[pk]
    try:
        return stores.get_store().get_step(pk)
    except StepRun.DoesNotExist:
        return None


def _record(uow: UnitOfWork, child: StepRun, outcome: dict[str, Any]) -> None:
    """Write a tool call's result into its llm step; the round's last one queues the llm step."""
    info = child.input if isinstance(child.input, dict) else {}
    parent = _parent(uow, int(info.get("parent_step") or 0))
    if parent is None or not is_waiting(parent):
        return  # the llm step was cancelled or rerouted meanwhile: nothing waits for this result
    output = copy.deepcopy(parent.output)
    rnd = next((r for r in output["rounds"] if r["round"] == info.get("round")), None)
    call = next((c for c in (rnd or {}).get("calls", []) if c["id"] == info.get("call_id")), None)
    if rnd is None or call is None:
        return
    call.update(outcome, step=child.pk)
    if not llm_tools.round_done(rnd):
        uow.update_step(parent, output=output)
        return
    output[WAITING] = False
    if uow.instance.status == InstanceStatus.HALTED:
        # Parked like the rest of the halted instance's work: a resume queues it.
        uow.update_step(parent, output=output)
        return
    uow.update_step(parent, status=StepStatus.QUEUED, due_at=uow.now, output=output)
    _queue_again(uow, parent)


def _queue_again(uow: UnitOfWork, step: StepRun) -> None:
    uow.event("step_queued", step.node_id, step, visit=step.visit, queue=step.queue, tool_results=True)
    uow.dispatch(step)

