"""Run due work in this process: one scheduler tick, then every queue in burst mode.

For `run_workflow --burst`, tests and benchmarks that want the real job path (RQ queues, claims,
commits) without separate worker processes.
"""

from __future__ import annotations

import django_rq

from workflows.engine.priorities import queue_names
from workflows.scheduler import reconciler
from workflows.workers.sync import StepWorker


def drain(queues: tuple[str, ...] = ("default", "io", "ai")) -> None:
    reconciler.tick()
    rq_queues = [django_rq.get_queue(name) for kind in queues for name in queue_names(kind)]
    worker = StepWorker(rq_queues, connection=rq_queues[0].connection)
    worker.work(burst=True, with_scheduler=False, logging_level="WARNING")
