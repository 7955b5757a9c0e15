"""Preparing a claimed step to run: its config rendered against the instance (secrets as
placeholders, never values), and the handler's argument with what the node needs (breaker, response
cache, tool rounds, sub-workflows); and the step's time limit.
"""

from __future__ import annotations

from concurrent.futures import Executor
from datetime import datetime

from workflows import clock
from workflows import store as stores
from workflows.credentials import store as credentials
from workflows.engine import expressions
from workflows.engine.errors import ExpressionError, PermanentStepError
from workflows.engine.nodes import StepCall, get_kind
from workflows.engine.nodes.llm import provider_of
from workflows.engine.nodes.llm_tools import split_tool_step_id
from workflows.engine.secrets import SecretScope
from workflows.runtime import subflows, tool_calls
from workflows.runtime.config import conf, engine_config
from workflows.runtime.observe import step_traceparent
from workflows.runtime.records import Claim, StepOutputs


def build_call(claim: Claim, now: datetime | None = None, offload: Executor | None = None) -> StepCall:
    """Render the node's config against the instance and make the handler's argument. `offload`:
    where its blocking helpers run off the event loop (StepCall.offload)."""
    now = now or clock.now()
    inst, node, kind = claim.instance, claim.node, claim.kind
    steps = StepOutputs(inst.pk)
    names = {"context": inst.context, "steps": steps, "input": inst.input}
    if tool_calls.is_tool_step(node.id):
        names.update(tool_calls.call_names(claim.step))
    raw = node.config
    # `{{ secrets.NAME }}` become this attempt's placeholders before rendering: the renderer never
    # sees a value, and the config the step records holds none (workflows/credentials/store.py).
    scope, account = credentials.for_node(node, kind.raw_config_keys)
    if tool_calls.is_tool_step(node.id):
        scope = _with_llm_secrets(claim, scope)
    try:
        config = {key: (value if key in kind.raw_config_keys
                        else expressions.render(scope.protect(value) if scope is not None else value, names))
                  for key, value in raw.items()}
    except ExpressionError as exc:
        raise PermanentStepError(f"node '{node.id}': template failed: {exc}") from None
    if tool_calls.is_tool_step(node.id):
        config = tool_calls.call_config(claim.step, node, config)
    rounds = tool_calls.rounds_of(claim.step) if node.type == "llm" else []
    call_index = 0
    if node.type == "llm" and provider_of(raw, engine_config().llm_default_provider) == "scripted":
        earlier = stores.get_store().earlier_attempts(inst.pk, node.id, claim.step.visit)
        # Each answered tool round was one call (its attempt was given back).
        call_index = earlier + claim.step.attempt - 1 + len(rounds)
    gate = None
    if node.type == "llm":
        from workflows.adapters.breakers import DatabaseBreaker, provider_key

        gate = DatabaseBreaker(provider_key(config, account))
    slots = None
    if node.type == "mcp":
        from workflows.adapters.slots import RedisSlots

        slots = RedisSlots()  # the server's calls at once, across every worker
    response_cache = None
    if node.type == "llm" and raw.get("cache"):
        # Only a node that opts in gets one: the others never query the cache table.
        from workflows.adapters.llm_cache import DatabaseCache

        response_cache = DatabaseCache(inst.definition_id, node.id, claim.step.pk, inst.pk)
    call = StepCall(
        node=node, config=config, context=inst.context, steps=steps, start_input=inst.input,
        instance_id=inst.pk, visit=claim.step.visit, attempt=claim.step.attempt,
        idempotency_key=claim.step.idempotency_key, now=now,
        # The step's own span in the instance's trace (runtime/observe.py): what http and llm nodes send.
        trace_id=step_traceparent(inst.trace_id, claim.step.pk, claim.step.attempt),
        activated_at=claim.step.created_at, engine=engine_config(), call_index=call_index, breaker=gate, slots=slots,
        offload=offload, secrets=scope, provider=account, cache=response_cache, tool_rounds=rounds,
        subflows=subflows.StepSubflows(claim) if claim.kind.starts_children else None,
    )
    claim.call = call
    return call


def _with_llm_secrets(claim: Claim, scope: SecretScope | None) -> SecretScope | None:
    """A tool step's scope also scrubs its llm node's secrets: the model saw them (in its prompt) and
    a tool's answer, built from the model's request, may carry one back to the row and the model."""
    llm_node_id, _ = split_tool_step_id(claim.node.id)
    llm_node = claim.graph.nodes.get(llm_node_id)
    if llm_node is None:
        return scope
    parent, _ = credentials.for_node(llm_node, get_kind(llm_node.type).raw_config_keys)
    if parent is None:
        return scope
    # Scrub-only: the tool never gets to send the llm node's secrets.
    scope = scope if scope is not None else SecretScope({})
    scope.also_scrub_scope(parent)
    return scope


def timeout_for(claim: Claim) -> float:
    return float(claim.node.timeout_s or conf("DEFAULT_STEP_TIMEOUT_S"))
