"""RQ job entry points: thin, they take ids and call the executor."""

from __future__ import annotations

import os
import socket

from workflows import executor

WORKER_NAME = f"{socket.gethostname()}:{os.getpid()}"


def run_step(step_id: int) -> int:
    return executor.run_step(step_id, WORKER_NAME)
