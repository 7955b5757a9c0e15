"""The planner node's generated definitions: what marks them, and the scheduler's purge of their versions.

A planner step records each plan as the next version of the definition `<parent-slug>--plan-<node>`
(workflows/runtime/subflows.py): one definition per parent workflow and planner node, one version per
planning visit. They are archived and hidden from the workflow lists and the instance filter (asked for
with `generated`), and never startable by hand.

What the purge deletes, and why no more. An instance references its version (and definition) with
PROTECT: a finished run's steps, events and pages need the graph it ran, so a plan version that any
instance ran on stays as long as that instance does (Steadyflow keeps history; deleting an instance in
the admin releases its plan). A plan version is deleted when, all at once:

- no instance runs on it (a plan whose child never started: its parent was cancelled, failed or expired
  in between, or the child refused the plan's input);
- it was recorded at least STEADYFLOW_PLAN_RETENTION_DAYS ago;
- the instance that planned it (its `planned.instance` note) is gone, or ended (completed, failed,
  cancelled, compensated) at least as long ago; checked under that instance's row lock, so a rerun
  reopening it cannot start the plan's child while its version goes;
- it is not its definition's latest version: numbers are never reused, so a finished step's output
  (`workflow`, `version`) never names another plan. Definitions themselves are never deleted.

A purged plan is still in its planner step's output (`plan`), which is what the run report and the
instance page show; only the version's own page (and "open the plan" link) is gone.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, OuterRef, ProtectedError, Q, Subquery

from workflows.adapters.llm_cache import PurgeSchedule

# What marks a generated slug: plain Python the runtime uses too (re-exported here for its callers).
from workflows.engine.generated_slugs import GENERATED_MARK as GENERATED_MARK
from workflows.engine.generated_slugs import PLAN_MARK as PLAN_MARK
from workflows.engine.generated_slugs import is_generated as is_generated
from workflows.engine.generated_slugs import plan_slug as plan_slug
from workflows.engine.statuses import InstanceStatus
from workflows.models import WorkflowInstance, WorkflowVersion

log = logging.getLogger("steadyflow.plans")

PURGE_EVERY = timedelta(hours=1)
PURGE_BATCH = 200
ENDED = (InstanceStatus.COMPLETED, InstanceStatus.FAILED, InstanceStatus.CANCELLED, InstanceStatus.COMPENSATED)


def generated(prefix: str = "") -> Q:
    """Generated definitions: the planner's and evaluations' (`prefix`: the lookup path to the definition,
    e.g. "definition__")."""
    return Q(**{f"{prefix}slug__contains": GENERATED_MARK})


def retention() -> timedelta:
    return timedelta(days=float(settings.STEADYFLOW["PLAN_RETENTION_DAYS"]))


def purgeable(now: datetime) -> list[tuple[int, int | None]]:
    """(version id, planning instance id) of up to PURGE_BATCH plan versions past retention that no
    instance runs on and that are not their definition's latest (the parent is checked by `purge`)."""
    latest = (WorkflowVersion.objects.filter(definition=OuterRef("definition")).order_by("-number")
              .values("number")[:1])
    rows = (WorkflowVersion.objects.filter(generated("definition__"), created_at__lte=now - retention(),
                                           instances__isnull=True)
            .annotate(latest=Subquery(latest)).exclude(number=F("latest"))
            .order_by("pk").values_list("pk", "graph__planned__instance"))
    return [(pk, int(parent) if isinstance(parent, int | str) and str(parent).isdigit() else None)
            for pk, parent in rows[:PURGE_BATCH]]


def purge(now: datetime) -> int:
    """Delete one batch of the plan versions the rules above release: how many went."""
    cutoff = now - retention()
    deleted = 0
    for pk, parent_id in purgeable(now):
        try:
            with transaction.atomic():
                if parent_id is not None:
                    parent = (WorkflowInstance.objects.select_for_update().filter(pk=parent_id)
                              .values_list("status", "finished_at", "updated_at").first())
                    if parent is not None:
                        status, finished_at, updated_at = parent
                        if status not in ENDED or (finished_at or updated_at) > cutoff:
                            continue
                gone, _ = WorkflowVersion.objects.filter(pk=pk, instances__isnull=True).delete()
                deleted += gone
        except ProtectedError:  # an instance started on it since the read: kept
            continue
    if deleted:
        log.info("purged %d generated plan version(s) past %s of retention", deleted, retention())
    return deleted


schedule = PurgeSchedule(purge, PURGE_EVERY)  # the scheduler's tick runs it (workflows/scheduler/reconciler.py)
