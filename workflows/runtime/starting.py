"""Starting instances: one, or many in one transaction with one round of enqueues after it.

A start creates the instance, runs its start node (structural: it completes in the same
transaction) and activates what follows, committing steps and events together (the instance's
context is the one it was created with: no snapshot until one is due). A repeated idempotency key
returns the instance the first request with it created on the same workflow definition (keys are
unique per definition: the same key on another workflow starts that one).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import IntegrityError

from workflows import clock
from workflows import store as stores
from workflows.engine import activations
from workflows.engine.inputs import prepare_input
from workflows.engine.priorities import NORMAL, parse_priority
from workflows.engine.statuses import InstanceStatus
from workflows.models import WorkflowInstance, WorkflowVersion
from workflows.runtime import effects
from workflows.runtime.activation import new_step, resolve, start_edges
from workflows.runtime.config import check_payload, conf, graph_for_version
from workflows.runtime.observe import CALLER_SPAN, incoming_trace, instance_traceparent, trace_parts
from workflows.runtime.records import ParentLink
from workflows.runtime.unit import UnitOfWork

log = logging.getLogger("steadyflow.runtime")


# A client's idempotency keys (the API's `Idempotency-Key`) are stored under a prefix of their own:
# internal starts key themselves `schedule:…`, `webhook:…` and `subflow:…`, and a client sending one
# of those first must not claim (and so suppress) the tick, the delivery or the child's start.
CLIENT_KEY_PREFIX = "client:"


def client_key(key: str | None) -> str | None:
    """The stored form of a key a client sent (None stays None)."""
    return f"{CLIENT_KEY_PREFIX}{key}" if key else None


def start_instance(version: WorkflowVersion, start_input: dict[str, Any] | None = None, *,
                   idempotency_key: str | None = None, user: Any = None,
                   now: datetime | None = None, parent: ParentLink | None = None,
                   traceparent: str | None = None, priority: str = NORMAL) -> WorkflowInstance:
    """Create an instance and run its start node, all in one transaction. `parent`: a sub-workflow's
    link to the step that starts it (runtime/subflows.py); `traceparent`: the caller's W3C header;
    `priority`: high, normal or low (engine/priorities.py)."""
    return start_instances(version, [start_input or {}], idempotency_keys=[idempotency_key], user=user,
                           now=now, parent=parent, traceparent=traceparent, priority=priority)[0]


def start_instances(version: WorkflowVersion, inputs: Sequence[dict[str, Any]], *,
                    idempotency_keys: Sequence[str | None] | None = None, user: Any = None,
                    now: datetime | None = None, parent: ParentLink | None = None,
                    traceparent: str | None = None, priority: str = NORMAL) -> list[WorkflowInstance]:
    """Start one instance per input, all in one transaction, their first jobs enqueued together
    after it commits (one Redis round trip per queue). Returns the instances in input order; where
    an idempotency key was used before on this definition, the instance that first used it.

    `traceparent`: the caller's W3C traceparent header. When valid, the instances join the caller's
    trace (their spans and their steps' hang under the caller's span); otherwise each starts its own.
    `priority`: high, normal or low (engine/priorities.py)."""
    priority = parse_priority(priority)
    keys = list(idempotency_keys or [None] * len(inputs))
    if len(keys) != len(inputs):
        raise ValueError("one idempotency key (or None) per input")
    inputs = declared_inputs(version, inputs)
    for start_input in inputs:
        check_payload("start input", start_input)
    store = stores.get_store()
    definition_id = version.definition_id
    existing = store.instances_by_keys(definition_id, [key for key in keys if key])
    todo = [i for i, key in enumerate(keys) if not key or key not in existing]
    if len(set(keys[i] for i in todo if keys[i])) < len([i for i in todo if keys[i]]):
        raise ValueError("an idempotency key appears twice in one bulk start")
    created: dict[int, WorkflowInstance] = {}
    if todo:
        try:
            made = _create(version, [(inputs[i], keys[i]) for i in todo], user, now or clock.now(), parent,
                           incoming_trace(traceparent), priority)
            created = dict(zip(todo, made, strict=True))
        except IntegrityError:
            # Another request with one of these keys raced past the lookup: the unique key let it
            # commit first. Nothing of this transaction stands; each start is made again on its own,
            # where it either commits or finds its twin.
            keyed = [key for key in (keys[i] for i in todo) if key]
            if not keyed:
                raise
            if len(todo) > 1:
                return [start_instance(version, inputs[i], idempotency_key=keys[i], user=user, now=now,
                                       parent=parent, traceparent=traceparent, priority=priority)
                    for i in range(len(inputs))]
            existing.update(store.instances_by_keys(definition_id, keyed))
            if keyed[0] not in existing:
                raise
    return [created[i] if i in created else existing[keys[i] or ""] for i in range(len(inputs))]


def declared_inputs(version: WorkflowVersion, inputs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each input with the defaults the workflow declares (graph `input`) filled in, checked against
    that schema; raises InputInvalid naming the wrong fields (`inputs[2].amount` in a bulk start)."""
    schema = graph_for_version(version.pk).input_schema
    out = []
    for i, start_input in enumerate(inputs):
        bulk = len(inputs) > 1
        out.append(prepare_input(schema, dict(start_input or {}), f"inputs[{i}]" if bulk else "input",
                                 i if bulk else None))
    return out


def _create(version: WorkflowVersion, items: list[tuple[dict[str, Any], str | None]], user: Any,
            now: datetime, parent: ParentLink | None = None,
            caller: tuple[str, str] | None = None, priority: str = NORMAL) -> list[WorkflowInstance]:
    graph = graph_for_version(version.pk)
    ttl = graph.settings.ttl_s or conf("DEFAULT_TTL_S")
    budget = graph.settings.budget_usd
    store = stores.get_store()
    units: list[UnitOfWork] = []
    # The start's conditions read only the input: decided here, before the transaction, so a
    # failing one refuses the start (ExpressionError, a 400) and none runs inside it.
    fired = [start_edges(graph, start_input) for start_input, _ in items]
    with store.atomic():
        instances = store.create_instances([WorkflowInstance(
            version=version, definition_id=version.definition_id, status=InstanceStatus.RUNNING,
            input=start_input, context=dict(start_input),
            state={"visits": {}, "joins": {}, "budget_tokens": graph.settings.budget_tokens,
                   **({"depth": parent.depth} if parent is not None else {}),
                   # The caller's span: the parent of the instance's span (workflows/observability/tracing.py).
                   **({CALLER_SPAN: caller[1]} if caller is not None else {})},
            trace_id=instance_traceparent(caller[0] if caller is not None else None),
            max_transitions=activations.max_transitions(graph, conf("DEFAULT_MAX_TRANSITIONS")),
            deadline=now + timedelta(seconds=ttl), idempotency_key=key or None,
            created_by=user if getattr(user, "pk", None) else None, created_at=now, updated_at=now,
            budget_usd=Decimal(str(budget)) if budget is not None else None,
            parent_step_id=parent.step_id if parent is not None else None, priority=priority,
        ) for start_input, key in items])
        for instance, start_fired in zip(instances, fired, strict=True):
            uow = UnitOfWork(instance, graph, now)
            uow.event("instance_started", version=version.number, definition=version.definition.slug,
                      trace_id=instance.trace_id)
            start = graph.start_node
            uow.set_instance(loop_count=1, state=instance.state)
            step = new_step(uow, start)
            step.output = instance.input
            resolve(uow, step, start_fired)
            units.append(uow)
        effects.write_many(store, units)
    for instance in instances:
        log.info("instance started", extra={"instance": instance.pk, "trace_id": trace_parts(instance.trace_id)[0]})
    return instances
