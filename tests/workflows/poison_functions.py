"""A python node function that kills the process running it, as a segfaulting C extension would.
Worker processes import it through STEADYFLOW_EXTRA_FUNCTIONS."""

from __future__ import annotations

import os

from workflows.engine.functions import FunctionCall, register_function


@register_function("tests.kill_worker")
def kill_worker(call: FunctionCall) -> None:
    os._exit(9)


@register_function("tests.kill_worker_once")
def kill_worker_once(call: FunctionCall) -> dict[str, int]:
    """Kill the process on the first call only (a marker file, named in args, survives the crash)."""
    marker = call.args["marker"]
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(9)
    return {"attempt": call.attempt}
