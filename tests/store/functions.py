"""Python node functions for the in-process store tests.

Their call counters live in process memory (the tests run every step in this process), keyed by
node and visit so that two runs of one scenario (one per store) count alike; `reset()` starts a run.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from workflows.engine.errors import PermanentStepError, StepError
from workflows.engine.functions import FunctionCall, FunctionResult, register_function

calls: Counter[str] = Counter()


def reset() -> None:
    calls.clear()


def _count(call: FunctionCall) -> int:
    key = f"{call.node_id}:{call.visit}"
    calls[key] += 1
    return calls[key]


@register_function("storetests.step")
def step(call: FunctionCall) -> FunctionResult:
    """Append this node to context['order'] and count it in context['n']."""
    order = [*call.context.get("order", []), call.node_id]
    n = int(call.context.get("n", 0)) + 1
    return FunctionResult(output={"node": call.node_id, "visit": call.visit, "attempt": call.attempt,
                                  "arg": call.args.get("arg")},
                          context={"order": order, "n": n})


@register_function("storetests.flaky")
def flaky(call: FunctionCall) -> dict[str, Any]:
    """Fail the first `failures` calls of a node visit, then succeed. `exception: true` raises a plain
    Python exception (its traceback is kept in the step's error)."""
    count = _count(call)
    failures = int(call.args.get("failures", 0))
    if count <= failures:
        if call.args.get("exception"):
            raise ValueError(f"planned failure {count} of {failures}")
        raise StepError(f"planned failure {count} of {failures}", details={"count": count})
    return {"calls": count, "attempt": call.attempt}


@register_function("storetests.boom")
def boom(call: FunctionCall) -> None:
    _count(call)
    raise PermanentStepError(f"{call.node_id} cannot go on")


@register_function("storetests.undo")
def undo(call: FunctionCall) -> dict[str, Any]:
    _count(call)
    return {"undone": call.node_id}


@register_function("storetests.collect")
def collect(call: FunctionCall) -> dict[str, Any]:
    """A join: which of `nodes` had succeeded when it ran, and their outputs."""
    seen = {}
    for node_id in call.args.get("nodes") or []:
        try:
            seen[node_id] = call.steps[node_id]["output"]
        except KeyError:
            continue
    return {"seen": sorted(seen), "outputs": seen}
