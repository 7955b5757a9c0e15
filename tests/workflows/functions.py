"""Python node functions for the integration tests.

Worker processes import this module at start-up because the tests start them with
STEADYFLOW_EXTRA_FUNCTIONS=tests.workflows.functions (see WorkflowsConfig.ready); the test process
imports it directly so that graphs naming these functions pass save-time validation.

Counters live in Redis, not in process memory: a retried step may run in another worker process,
and "fails N times" must count every real execution.
"""

from __future__ import annotations

import os
import time
from typing import Any

from workflows.engine.errors import PermanentStepError, StepError
from workflows.engine.functions import FunctionCall, FunctionResult, register_function

EXTRA_FUNCTIONS_ENV = {"STEADYFLOW_EXTRA_FUNCTIONS": "tests.workflows.functions"}
COUNTER_PREFIX = "steadyflow-test:calls:"


def _redis() -> Any:
    import django_rq

    return django_rq.get_connection("default")


def calls_so_far(key: str) -> int:
    value = _redis().get(COUNTER_PREFIX + key)
    return int(value) if value is not None else 0


@register_function("tests.echo")
def echo(call: FunctionCall) -> FunctionResult:
    """Output the (rendered) args; `set` in the args also updates the context."""
    return FunctionResult(output=dict(call.args), context=dict(call.args.get("set") or {}))


@register_function("tests.record")
def record(call: FunctionCall) -> FunctionResult:
    """Append this node to context['order'] and say which process ran it (chains only: parallel
    branches would race on the list)."""
    from workflows.jobs import WORKER_NAME

    order = list(call.context.get("order") or []) + [call.node_id]
    output = {"node": call.node_id, "visit": call.visit, "attempt": call.attempt, "pid": os.getpid(),
              "worker": WORKER_NAME, "key": call.idempotency_key}
    return FunctionResult(output=output, context={"order": order})


@register_function("tests.fail_times")
def fail_times(call: FunctionCall) -> dict[str, Any]:
    """Fail the first `failures` calls of this step, then succeed.

    args: failures (int), permanent (bool: raise a permanent error), exception (str: raise a plain
    Python exception of that name instead of a StepError, as a buggy function would).
    """
    count = int(_redis().incr(COUNTER_PREFIX + call.idempotency_key))
    failures = int(call.args.get("failures", 0))
    if count <= failures:
        message = f"planned failure {count} of {failures}"
        if call.args.get("exception") == "ValueError":
            raise ValueError(message)
        if call.args.get("permanent"):
            raise PermanentStepError(message)
        raise StepError(message)
    return {"calls": count, "attempt": call.attempt}


@register_function("tests.sleep")
def sleep(call: FunctionCall) -> dict[str, Any]:
    """Sleep `seconds` (a step that outlives its timeout_s is interrupted)."""
    _redis().incr(COUNTER_PREFIX + call.idempotency_key)
    seconds = float(call.args.get("seconds", 0))
    time.sleep(seconds)
    return {"slept": seconds}


@register_function("tests.collect")
def collect(call: FunctionCall) -> dict[str, Any]:
    """A join: report which of `nodes` had succeeded outputs when this step ran."""
    seen = []
    for node_id in call.args.get("nodes") or []:
        try:
            seen.append({"node": node_id, "output": call.steps[node_id]["output"]})
        except KeyError:
            continue
    return {"seen": [s["node"] for s in seen], "outputs": seen}


@register_function("tests.log_line")
def log_line(call: FunctionCall) -> dict[str, Any]:
    """Log one line from inside a step (tests of the structured logs): the worker's formatter adds the
    step's context; `api_token` is an `extra` field the formatter must leave out."""
    import logging

    logging.getLogger("tests.functions").info("hello from a step", extra={"colour": "blue",
                                                                         "api_token": "sk-must-not-appear"})
    return {"logged": True}


@register_function("tests.fail_counted")
def fail_counted(call: FunctionCall) -> dict[str, Any]:
    """Fail (permanently) the first `failures` calls counted under args `counter`, whatever the step:
    a sub-workflow's first child fails, the one its retry starts succeeds."""
    count = int(_redis().incr(COUNTER_PREFIX + str(call.args["counter"])))
    if count <= int(call.args.get("failures", 0)):
        raise PermanentStepError(f"planned failure {count}")
    return {"calls": count}
STARTED_PREFIX = "steadyflow-test:tool-started:"


@register_function("tests.tool_rendezvous")
def tool_rendezvous(call: FunctionCall) -> dict[str, Any]:
    """An agent's tool (tests/workflows/test_tool_calls.py): counts each run (calls_so_far("<run>:<me>")),
    says it started, then waits (bounded) until the tool named `other` started too, so two calls
    run in parallel overlap for sure when two workers take them. With `hang_first`, its first attempt
    then hangs (the test kills its worker there)."""
    redis = _redis()
    run = call.args.get("run", "")  # the test's own token: instance ids repeat between tests
    redis.incr(f"{COUNTER_PREFIX}{run}:{call.args['me']}")
    redis.set(f"{STARTED_PREFIX}{run}:{call.args['me']}", os.getpid())
    other = call.args.get("other")
    deadline = time.monotonic() + 30
    while other and not redis.exists(f"{STARTED_PREFIX}{run}:{other}") and time.monotonic() < deadline:
        time.sleep(0.02)
    if call.args.get("hang_first") and call.attempt == 1:
        time.sleep(120)
    if call.args.get("fail"):
        raise PermanentStepError(f"tool {call.args['me']} refused")
    return {"me": call.args["me"], "attempt": call.attempt, "pid": os.getpid()}


def tool_started_pid(run: str, me: str) -> int | None:
    value = _redis().get(f"{STARTED_PREFIX}{run}:{me}")
    return int(value) if value is not None else None
