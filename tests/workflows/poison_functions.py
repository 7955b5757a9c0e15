"""A python node function that kills the process running it, as a segfaulting C extension would.
Worker processes import it through STEADYFLOW_EXTRA_FUNCTIONS."""

from __future__ import annotations

import os

from workflows.engine.functions import FunctionCall, register_function


@register_function("tests.kill_worker")
def kill_worker(call: FunctionCall) -> None:
    os._exit(9)
