"""Putting step jobs on RQ queues. Called only after the transaction that made the steps due has
committed; if Redis is unreachable the steps stay queued in the database and the reconciler
enqueues them later, so a failure here is logged, never raised into the caller.

Fan-outs go out in batches: the steps one transition made due on one queue (one instance) are split
into as many jobs as there are workers listening on that queue (at most BATCH_MAX steps a job), so
a worker claims its share in one statement and commits their outcomes under one instance lock in
one transaction (runtime.run_steps). A batch job's id is that of its first step; the reconciler
knows (see job_holding).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import django_rq
from django.conf import settings
from rq import Queue, Worker

from workflows.engine.priorities import kind_of

log = logging.getLogger("steadyflow.dispatch")

JOB_FUNC = "workflows.jobs.run_step"
BATCH_JOB_FUNC = "workflows.jobs.run_steps"
# The ai queue's consumer keeps each call in flight on its own: its steps are never batched.
UNBATCHED_QUEUES = frozenset({"ai"})
WORKER_COUNT_TTL_S = 5.0

_worker_counts: dict[str, tuple[float, int]] = {}


def job_id_for(step_id: int) -> str:
    # Deterministic: the reconciler can ask Redis whether a step's job exists.
    return f"step-{step_id}"


def workers_on(queue: Queue) -> int:
    """Workers listening on a queue, read from RQ's registry at most every few seconds."""
    cached = _worker_counts.get(queue.name)
    now = time.monotonic()
    if cached is not None and now - cached[0] < WORKER_COUNT_TTL_S:
        return cached[1]
    count = Worker.count(connection=queue.connection, queue=queue)
    _worker_counts[queue.name] = (now, count)
    return count


def batches(step_ids: list[int], workers: int, most: int) -> list[list[int]]:
    """Split one transition's steps on one queue into one batch per worker, each at most `most`."""
    if most <= 1 or len(step_ids) <= 1:
        return [[step_id] for step_id in step_ids]
    size = min(most, max(1, math.ceil(len(step_ids) / max(1, workers))))
    return [step_ids[i:i + size] for i in range(0, len(step_ids), size)]


def _job(step_ids: list[int]) -> Any:
    if len(step_ids) == 1:
        return Queue.prepare_data(JOB_FUNC, args=(step_ids[0],), job_id=job_id_for(step_ids[0]), timeout=-1,
                                  result_ttl=0, failure_ttl=86400)
    return Queue.prepare_data(BATCH_JOB_FUNC, args=(step_ids,), job_id=job_id_for(step_ids[0]), timeout=-1,
                              result_ttl=0, failure_ttl=86400)


def enqueue_steps(items: list[tuple[int, str]], *, batch: bool = False) -> int:
    """Enqueue jobs for these (step id, RQ queue) pairs (the queue of the step's kind at its
    priority, engine/priorities.queue_name), in the order given (the critical path's first); with
    `batch`, all of one instance (one transition's), several steps a job where a queue has fewer
    workers than steps. Returns how many steps went out."""
    by_queue: dict[str, list[int]] = {}
    for step_id, queue_name in items:
        by_queue.setdefault(queue_name, []).append(step_id)
    sent = 0
    most = int(settings.STEADYFLOW.get("BATCH_MAX", 1))
    for name, step_ids in by_queue.items():
        try:
            rq_queue: Queue = django_rq.get_queue(name)
            if batch and kind_of(name) not in UNBATCHED_QUEUES and len(step_ids) > 1 and most > 1:
                groups = batches(step_ids, workers_on(rq_queue), most)
            else:
                groups = [[step_id] for step_id in step_ids]
            rq_queue.enqueue_many([_job(group) for group in groups])
            sent += len(step_ids)
        except Exception as exc:  # noqa: BLE001 - Redis down: the reconciler re-dispatches from the DB
            log.warning("could not enqueue %d step(s) on %s: %s (the reconciler will retry)",
                        len(step_ids), name, exc)
    return sent


def step_ids_of(job: Any) -> list[int]:
    """The steps a step job carries (one, or a batch)."""
    if job.func_name == BATCH_JOB_FUNC:
        return [int(step_id) for step_id in job.args[0]]
    if job.func_name == JOB_FUNC:
        return [int(job.args[0])]
    return []
