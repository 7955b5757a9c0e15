"""RQ job entry points: thin, they take ids and call the runtime."""

from __future__ import annotations

import os
import socket

from workflows import runtime

WORKER_NAME = f"{socket.gethostname()}:{os.getpid()}"


def run_step(step_id: int) -> int:
    return runtime.run_step(step_id, WORKER_NAME)


def run_steps(step_ids: list[int]) -> int:
    """A batch of queued steps of one instance (see dispatch.enqueue_steps)."""
    return runtime.run_steps([int(step_id) for step_id in step_ids], WORKER_NAME)
