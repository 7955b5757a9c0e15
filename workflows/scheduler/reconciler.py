"""The scheduler/reconciler: the database, not Redis, says what is due.

Each tick:
- promotes timers and retries whose time has come (pending/retrying -> queued) and enqueues them;
- re-enqueues queued steps that no queue holds (Redis flushed or restarted, a crash between commit
  and enqueue) once they have waited REDISPATCH_AFTER_S;
- takes back running steps whose lease expired (the worker died or hung): retried while attempts
  remain, otherwise failed;
- stops instances past their deadline (TTL);
- purges expired llm cache rows (workflows/adapters/llm_cache.py), at most once a minute, and the planner's
  generated plan versions past retention (workflows/authoring/plans.py), at most once an hour;
- rolls up finished days and deletes finished instances' history past STEADYFLOW_RETENTION_DAYS, a
  batch per tick while there is some, and prunes active instances' old checkpoints (workflows/retention/);
- advances running evaluations (workflows/evaluations/runner.py), at most once a second.
- settles sub-workflow steps whose child ended, and cancels children whose parent step is no longer
  open (the post-commit effects that do both may have died with their process).
Everything it does is safe to repeat: duplicate jobs lose the claim and do nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from workflows import clock, runtime
from workflows.adapters import llm_cache
from workflows.authoring import plans
from workflows.engine.errors import StepError
from workflows.engine.priorities import kind_of, queue_name
from workflows.engine.statuses import INSTANCE_ACTIVE, InstanceStatus, StepStatus
from workflows.evaluations import runner as evaluation_runner
from workflows.models import StepRun, WorkflowInstance
from workflows.retention import runner as retention
from workflows.workers import dispatch
from workflows.workers.redis_outage import REDIS_ERRORS

log = logging.getLogger("steadyflow.reconciler")
BATCH = 500


@dataclass
class TickReport:
    promoted: int = 0
    redispatched: int = 0
    reclaimed: int = 0
    expired: int = 0
    cache_purged: int = 0
    subflows: int = 0
    plans_purged: int = 0
    evaluations: int = 0
    history_purged: int = 0  # instances whose history retention deleted

    def __bool__(self) -> bool:
        return bool(self.promoted or self.redispatched or self.reclaimed or self.expired or self.cache_purged
                    or self.subflows or self.plans_purged or self.history_purged)


def due_steps(now: datetime) -> QuerySet[StepRun]:
    """Pending and retrying steps past their due time (the partial index step_open_due serves it).
    Steps of a halted instance stay put until an operator resumes it."""
    return StepRun.objects.filter(status__in=(StepStatus.PENDING, StepStatus.RETRYING), due_at__lte=now,
                                  instance__status__in=[*INSTANCE_ACTIVE, InstanceStatus.COMPENSATING])


def queued_before(moment: datetime) -> QuerySet[StepRun]:
    """Queued steps due before `moment`: their job may be lost (step_open_due)."""
    return StepRun.objects.filter(status=StepStatus.QUEUED, due_at__lte=moment)


def expired_leases(now: datetime) -> QuerySet[StepRun]:
    """Running steps whose lease ran out (the partial index step_running_lease)."""
    return StepRun.objects.filter(status=StepStatus.RUNNING, lease_until__lt=now)


def promote_due(now: datetime) -> int:
    due = list(due_steps(now).values_list("pk", "queue", "priority", "status")[:BATCH])
    ready = []
    for pk, kind, priority, status in due:
        # Conditional: a concurrent cancel or another scheduler wins cleanly.
        if StepRun.objects.filter(pk=pk, status=status).update(status=StepStatus.QUEUED, due_at=now):
            ready.append((pk, queue_name(kind, priority)))
    if ready:
        dispatch.enqueue_steps(ready)
    return len(ready)


def redispatch_lost(now: datetime, after_s: float) -> int:
    import django_rq
    from rq.job import JobStatus

    stale = list(queued_before(now - timedelta(seconds=after_s))
                 .values_list("pk", "queue", "priority", "instance_id", "created_at")[:BATCH])
    lost = []
    waiting: dict[str, set[str] | None] = {}  # job ids on each queue, read at most once per tick
    for pk, kind, priority, instance_id, created_at in stale:
        queue = queue_name(kind, priority)
        connection = django_rq.get_connection(queue)
        job_id = dispatch.job_id_for(pk)
        if queue not in waiting:
            waiting[queue] = _job_ids_on(queue)
        on_queue = waiting[queue]
        if on_queue is not None and job_id in on_queue:
            # Its own job waits on its queue (a backlog, not a loss): one set lookup, no fetch per
            # step per tick (fetching each cost 1.4-3.6 ms of scheduler CPU per step with 2,000
            # chains queued, docs/BENCHMARKS.md).
            continue
        started_at = None
        try:
            job = job_holding(pk, queue, instance_id, created_at, connection)
            job_id = job.id
            status = job.get_status(refresh=False)
            started_at = job.started_at
        except REDIS_ERRORS:
            # Redis went away mid-tick: nothing can be enqueued, and each further fetch would spend
            # redis-py's retries first. The scheduler waits for Redis and ticks again.
            raise
        except Exception:  # noqa: BLE001 - NoSuchJobError, or a job hash that no longer parses
            status = None
        if status in (JobStatus.SCHEDULED, JobStatus.DEFERRED):
            continue
        recent = now - timedelta(seconds=after_s)
        # RQ stamps started_at with the worker host's own clock: one far ahead of ours would make a
        # dead worker's job look "starting" for as long as its skew. Trusted only within bounds.
        if (status == JobStatus.STARTED and started_at is not None
                and recent < started_at <= now + timedelta(seconds=after_s)):
            continue  # a worker is starting it right now: its claim comes next
        if status == JobStatus.QUEUED:
            # A worker that popped the job and died before starting it leaves it QUEUED but off its
            # queue (in RQ's intermediate list, or nowhere for a multi-queue worker).
            if queue not in waiting:
                waiting[queue] = _job_ids_on(queue)
            ids = waiting[queue]
            if ids is None or job_id in ids:
                continue
        # STARTED is lost too: a live worker claims the step moments after starting its job, so a
        # step still queued in the database REDISPATCH_AFTER_S later lost that worker. Should the
        # worker be alive after all, the duplicate job loses the claim and does nothing.
        lost.append((pk, queue))
    if lost:
        StepRun.objects.filter(pk__in=[pk for pk, _ in lost], status=StepStatus.QUEUED).update(due_at=now)
        sent = dispatch.enqueue_steps(lost)
        log.warning("re-dispatched %d of %d queued step(s) that no queue held", sent, len(lost))
        return sent
    return 0


def job_holding(step_id: int, queue: str, instance_id: int, created_at: datetime, connection: Any) -> Any:
    """The RQ job that carries a step: its own, or the batch job of a step made due with it (the
    same transition: same instance, queue and creation time), named after that batch's first step.
    Raises when there is none."""
    from rq.exceptions import NoSuchJobError
    from rq.job import Job

    try:
        job = Job.fetch(dispatch.job_id_for(step_id), connection=connection)
        if step_id in dispatch.step_ids_of(job):
            return job
    except NoSuchJobError:
        pass
    siblings = (StepRun.objects.filter(instance_id=instance_id, queue=kind_of(queue), created_at=created_at,
                                       pk__lt=step_id)
                .order_by("-pk").values_list("pk", flat=True)[:settings.STEADYFLOW.get("BATCH_MAX", 1)])
    for sibling in siblings:
        try:
            job = Job.fetch(dispatch.job_id_for(sibling), connection=connection)
        except NoSuchJobError:
            continue
        if step_id in dispatch.step_ids_of(job):
            return job
    raise NoSuchJobError(f"no job carries step {step_id}")


QUEUE_SCAN_LIMIT = 10_000


def _job_ids_on(queue: str) -> set[str] | None:
    """The job ids waiting on a queue; None when unknown (Redis down) or too long to scan each tick,
    in which case a QUEUED job is trusted to be on it."""
    import django_rq

    try:
        rq_queue = django_rq.get_queue(queue)
        if rq_queue.count > QUEUE_SCAN_LIMIT:
            return None
        return set(rq_queue.get_job_ids())
    except Exception:  # noqa: BLE001 - Redis unreachable: nothing can be enqueued this tick anyway
        return None


def reclaim_expired_leases(now: datetime) -> int:
    expired = list(expired_leases(now).values_list("pk", "lease_token")[:BATCH])
    count = 0
    for pk, token in expired:
        claim = _claim_for_reclaim(pk, token)
        if claim is None:
            continue
        error = StepError(f"worker {claim.worker or '?'} stopped heartbeating (lease expired)",
                          details={"code": "lease_expired"})
        # Retried per the node's policy, like any transient failure; out of attempts, it fails.
        runtime.finish_step(claim, runtime.Outcome(error=error), now=now)
        count += 1
    return count


def _claim_for_reclaim(pk: int, token: str) -> runtime.Claim | None:
    step = StepRun.objects.filter(pk=pk, status=StepStatus.RUNNING, lease_token=token).first()
    if step is None:
        return None
    instance = WorkflowInstance.objects.get(pk=step.instance_id)
    graph = runtime.graph_for_version(instance.version_id)
    node = runtime.node_for_step(graph, step.node_id)
    from workflows.engine.nodes import get_kind

    return runtime.Claim(step=step, instance=instance, graph=graph, node=node, kind=get_kind(node.type),
                          token=token, worker=step.worker)


def expire_instances(now: datetime) -> int:
    ids = list(WorkflowInstance.objects.filter(status__in=INSTANCE_ACTIVE, deadline__lt=now)
               .values_list("pk", flat=True)[:BATCH])
    return sum(1 for pk in ids if runtime.expire_instance(pk, now))


def tick(now: datetime | None = None) -> TickReport:
    now = now or clock.now()
    conf = runtime.conf
    report = TickReport()
    report.expired = expire_instances(now)
    report.reclaimed = reclaim_expired_leases(now)
    report.subflows = runtime.reconcile_subflows(now)
    report.promoted = promote_due(now)
    report.redispatched = redispatch_lost(now, conf("REDISPATCH_AFTER_S"))
    report.cache_purged = llm_cache.schedule.run_if_due(now)  # expired llm replies, once a minute
    report.plans_purged = plans.schedule.run_if_due(now)  # generated plan versions past retention, hourly
    report.evaluations = evaluation_runner.schedule.run_if_due(now)  # running evaluations: score, start rows
    report.history_purged = retention.schedule.run_if_due(now)  # a batch per tick while due, else every 5 min
    if report:
        from workflows.observability import metrics

        metrics.count_tick(report.promoted, report.redispatched, report.reclaimed, report.expired)
    return report



