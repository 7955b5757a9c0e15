"""RQ job entry points: thin, they take ids and call the runtime."""

from __future__ import annotations

import os
import socket

from workflows import runtime

WORKER_NAME = f"{socket.gethostname()}:{os.getpid()}"


def run_step(step_id: int) -> int:
    return runtime.run_step(step_id, WORKER_NAME)
