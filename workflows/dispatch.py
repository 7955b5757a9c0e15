"""Putting step jobs on RQ queues. Called only after the transaction that made the steps due has
committed; if Redis is unreachable the steps stay queued in the database and the reconciler
enqueues them later, so a failure here is logged, never raised into the caller."""

from __future__ import annotations

import logging

import django_rq
from rq import Queue

log = logging.getLogger("steadyflow.dispatch")

JOB_FUNC = "workflows.jobs.run_step"


def job_id_for(step_id: int) -> str:
    # Deterministic: the reconciler can ask Redis whether a step's job exists.
    return f"step-{step_id}"


def enqueue_steps(items: list[tuple[int, str]]) -> int:
    by_queue: dict[str, list[int]] = {}
    for step_id, queue_name in items:
        by_queue.setdefault(queue_name, []).append(step_id)
    sent = 0
    for name, step_ids in by_queue.items():
        try:
            rq_queue: Queue = django_rq.get_queue(name)
            jobs = [
                Queue.prepare_data(JOB_FUNC, args=(step_id,), job_id=job_id_for(step_id), timeout=-1,
                                   result_ttl=0, failure_ttl=86400)
                for step_id in step_ids
            ]
            rq_queue.enqueue_many(jobs)
            sent += len(jobs)
        except Exception as exc:  # noqa: BLE001 - Redis down: the reconciler re-dispatches from the DB
            log.warning("could not enqueue %d step(s) on %s: %s (the reconciler will retry)",
                        len(step_ids), name, exc)
    return sent
