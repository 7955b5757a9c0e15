"""The runtime's one hook point for observability (metrics, traces, log context).

Two things are observable, both without extra queries or round trips:

- `committed(unit)`: every UnitOfWork a store has committed (called by the stores after COMMIT).
  The unit says everything a metric or a span needs: the steps that left `running` (node, queue,
  attempt, started/finished times, usage), halts, instances reaching a final status.
- `current_step`: the step a worker is running in this thread or task, set once per step; log
  records read it only when something is actually logged (workflows/observability/logging_setup.py).

Observers are registered by the Django app (workflows/observability/setup.py); with none registered the
cost per commit is one truth test of a list.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workflows.runtime.records import Claim
    from workflows.store.unit import UnitOfWork

log = logging.getLogger("steadyflow.observe")

CALLER_SPAN = "trace_caller_span"  # the state key holding the span id of a caller's traceparent (starting.py)

CommitObserver = Callable[["UnitOfWork"], None]
observers: list[CommitObserver] = []

# The claim a worker runs here (a thread for the synchronous workers, an asyncio task in the ai
# consumer). One ContextVar.set per step; nothing is formatted unless a line is logged.
current_step: ContextVar[Claim | None] = ContextVar("steadyflow_current_step", default=None)


def step_fields(claim: Claim) -> dict[str, Any]:
    """What a log line names of a step: its trace, instance, node, visit, attempt and worker. The
    running step's by default (workflows/observability/logging_setup.py); a line about another step (a batch's
    discarded outcome) passes that step's as `extra`, which wins."""
    step = claim.step
    return {"trace_id": trace_parts(claim.instance.trace_id)[0], "instance": claim.instance.pk,
            "node": step.node_id, "visit": step.visit, "attempt": step.attempt, "worker": claim.worker}


def add_observer(observer: CommitObserver) -> None:
    if observer not in observers:
        observers.append(observer)


def remove_observer(observer: CommitObserver) -> None:
    if observer in observers:
        observers.remove(observer)


def committed(unit: UnitOfWork) -> None:
    """Tell the observers about a committed unit. An observer's failure is logged, never raised:
    the commit has happened and its effects (enqueues, live notices) must still run."""
    for observer in observers:
        try:
            observer(unit)
        except Exception:  # noqa: BLE001 - observability must never break a transition
            log.exception("an observer failed on a commit of instance %s", unit.instance.pk)


# --- W3C trace context ------------------------------------------------------------------------

def trace_parts(traceparent: str) -> tuple[str, str]:
    """(trace id, parent id) of a stored traceparent `00-<32 hex>-<16 hex>-01`. The parent id of an
    instance's traceparent is the id of the instance's own span."""
    parts = traceparent.split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and len(parts[2]) == 16:
        return parts[1], parts[2]
    return "0" * 32, "0" * 16


TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def incoming_trace(header: str | None) -> tuple[str, str] | None:
    """(trace id, span id) of a caller's W3C `traceparent` header, or None when it is absent or not a
    valid one (W3C Trace Context §3.2: version ff, all-zero ids and, for version 00, anything after
    the flags are invalid). A bad header is only logged (at debug): it never refuses a request."""
    if not header:
        return None
    found = TRACEPARENT.fullmatch(header.strip())
    if found is None or found[1] == "ff" or (found[1] == "00" and found[5]) \
            or found[2] == "0" * 32 or found[3] == "0" * 16:
        log.debug("ignoring an invalid traceparent header %r", header[:100])
        return None
    return found[2], found[3]


def instance_traceparent(caller_trace_id: str | None = None) -> str:
    """A new instance's traceparent: the caller's trace id when it sent one (else a new one) and a new
    span id, the instance span's."""
    return f"00-{caller_trace_id or secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def step_span_id(step_id: int, attempt: int) -> str:
    """The span id of one attempt of one step: derived, so a handler's outgoing traceparent (sent
    before the span exists) and the span recorded after the commit agree without shared state."""
    digest = hashlib.blake2b(f"{step_id}:{attempt}".encode(), digest_size=8).hexdigest()
    return digest if digest != "0" * 16 else "0" * 15 + "1"


def step_traceparent(instance_traceparent: str, step_id: int, attempt: int) -> str:
    """The traceparent a step's handler sends (http and llm nodes): the instance's trace, the step's span."""
    trace_id, _ = trace_parts(instance_traceparent)
    return f"00-{trace_id}-{step_span_id(step_id, attempt)}-01"
