"""Python node functions (and one fault hook) for the fault suite.

Worker processes import this module at start-up because the fault tests start them with
STEADYFLOW_EXTRA_FUNCTIONS=tests.faults.functions; the test process imports it directly so graphs
naming these functions pass save-time validation.

Side effects go to the sink (sink.py) with the step's idempotency key, like a real API call would.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import httpx

from workflows.engine.errors import PermanentStepError, StepError
from workflows.engine.functions import FunctionCall, register_function

EXTRA_FUNCTIONS_ENV = {"STEADYFLOW_EXTRA_FUNCTIONS": "tests.faults.functions"}
# Set in one process's environment: that process kills itself (SIGKILL) at the moment it would
# enqueue jobs after a commit. It is how a test crashes a process between commit and enqueue.
CRASH_BEFORE_ENQUEUE_ENV = "STEADYFLOW_FAULT_CRASH_BEFORE_ENQUEUE"


def _effect(call: FunctionCall) -> dict[str, Any]:
    sink = call.args.get("sink")
    if not sink:
        return {}
    response = httpx.post(str(sink), headers={"Idempotency-Key": call.idempotency_key}, timeout=30)
    response.raise_for_status()
    return dict(response.json())


@register_function("faults.effect")
def effect(call: FunctionCall) -> dict[str, Any]:
    """Call the sink (args.sink) with the idempotency key, then sleep args.seconds."""
    receipt = _effect(call)
    time.sleep(float(call.args.get("seconds", 0)))
    return {"receipt": receipt, "attempt": call.attempt, "pid": os.getpid()}


@register_function("faults.big_output")
def big_output(call: FunctionCall) -> dict[str, Any]:
    """Return an output of args.bytes bytes."""
    return {"blob": "x" * int(call.args.get("bytes", 10 * 1024 * 1024))}


@register_function("faults.arm_commit_drop")
def arm_commit_drop(call: FunctionCall) -> dict[str, Any]:
    """Apply a side effect, then tell the test's PostgreSQL proxy (pgproxy.py) to swallow the
    acknowledgement of the next COMMIT on this worker's connection: the one that records this
    step's outcome. The marker query travels on the very connection finish_step will use."""
    from django.db import connection

    from tests.faults.pgproxy import ARM_MARKER

    receipt = _effect(call)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT '{ARM_MARKER.decode()}'")
    return {"receipt": receipt}


@register_function("faults.die")
def die(call: FunctionCall) -> None:
    """A poison step: kills the process running it, every time."""
    _effect(call)
    os.kill(os.getpid(), signal.SIGKILL)


@register_function("faults.flaky")
def flaky(call: FunctionCall) -> dict[str, Any]:
    """Fails its first attempt with a transient error (retried per the node's policy), then succeeds:
    a retry whose due_at the failing worker stamps and the scheduler judges."""
    if call.attempt == 1:
        raise StepError("transient failure of the first attempt")
    return {"attempt": call.attempt}


@register_function("faults.fail")
def fail(call: FunctionCall) -> None:
    """Fails for good (a permanent error): what starts a saga's compensation."""
    raise PermanentStepError(str(call.args.get("message", "refused")))


def _install_crash_before_enqueue() -> None:
    from workflows.workers import dispatch

    def crash(items: list[tuple[int, str]], **options: object) -> int:
        # The transaction that made these steps due has committed; the jobs never reach Redis.
        os.kill(os.getpid(), signal.SIGKILL)
        return 0  # pragma: no cover - not reached

    dispatch.enqueue_steps = crash  # type: ignore[assignment]


if os.environ.get(CRASH_BEFORE_ENQUEUE_ENV) == "1":
    _install_crash_before_enqueue()
