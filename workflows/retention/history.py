"""Deleting finished instances' history, a batch at a time (docs/operating-retention.md).

What goes: the rows of every table whose foreign key to the instance cascades (today steps, events,
checkpoints and state deltas: found from the models, so a history table added later is covered without a
change here), except the ones in KEEP, the newest snapshot that verifies and the deltas it refers to.
What stays: the instance row, which is the run's summary (status, input, final context and state, error,
tokens, cost, timestamps), its review items and audit entries (people's
decisions, small, one per halt or operation), and rows that only point at it (schedule fires,
notification deliveries: their foreign keys do not cascade).

An instance's history goes when, all at once:
- it is finished (completed, failed, cancelled, compensated) and finished_at is older than
  STEADYFLOW_RETENTION_DAYS, checked again under its row lock (a rerun reopening it takes that lock too);
- the day it finished is rolled up (workflows/retention/rollup.py), so the charts keep its figures;
- no review item that is open belongs to it or points at one of its steps;
- no sub-workflow it started is still active (pending, running or waiting).
"""

from __future__ import annotations

import logging
import time as clock
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Count, Q

from workflows.engine import deltas
from workflows.engine.statuses import INSTANCE_ACTIVE, INSTANCE_FINAL
from workflows.models import Checkpoint, ReviewItem, ReviewStatus, StateDelta, WorkflowInstance
from workflows.retention import rollup

log = logging.getLogger("steadyflow.retention")

# Cascading tables that are not history: human decisions and the audit trail stay with the summary.
KEEP = frozenset({"workflows.reviewitem", "workflows.auditentry"})
SCAN_WINDOW = 1000  # finished instances looked at per query while looking for history to delete
# History rows one transaction deletes at most (an instance with more gets a transaction of its own), so
# a batch of long runs (a 1,000-step agent has thousands of rows, megabytes each) is not one long lock.
ROWS_PER_TRANSACTION = 5000


def retention() -> timedelta | None:
    """How long finished instances keep their history; None: forever (STEADYFLOW_RETENTION_DAYS=0)."""
    days = float(settings.STEADYFLOW["RETENTION_DAYS"])
    return timedelta(days=days) if days > 0 else None


def history_models() -> list[tuple[type[models.Model], str]]:
    """(model, its foreign key to the instance) for every table whose rows are an instance's history,
    ordered so that a table whose rows point at another history table's rows is emptied first (events
    before the steps they name: no SET NULL on rows about to go)."""
    found: list[tuple[type[models.Model], str]] = []
    for rel in WorkflowInstance._meta.related_objects:
        if not (rel.one_to_many or rel.one_to_one) or rel.on_delete is not models.CASCADE:
            continue
        model = rel.related_model
        if isinstance(model, str) or model._meta.label_lower in KEEP:
            continue
        found.append((model, rel.field.name))

    def points_at(a: type[models.Model], b: type[models.Model]) -> bool:
        return any(f.is_relation and f.related_model is b for f in a._meta.get_fields() if f.concrete)

    ordered: list[tuple[type[models.Model], str]] = []
    remaining = list(found)
    while remaining:
        pick = next((entry for entry in remaining
                     if not any(points_at(other[0], entry[0]) for other in remaining if other is not entry)),
                    remaining[0])  # a cycle: any order, the ORM's SET NULL handles it
        ordered.append(pick)
        remaining.remove(pick)
    return ordered


def kept_snapshots(ids: list[int]) -> list[Checkpoint]:
    """The one snapshot each instance keeps: its newest that verifies. The context lives in snapshots
    and state deltas (docs/DESIGN.md, "State: deltas and snapshots"), and a run's end forces a
    snapshot, so this one holds the final state the summary row shows."""
    kept = []
    for instance_id in ids:
        for snapshot in Checkpoint.objects.filter(instance_id=instance_id).order_by("-seq")[:5]:
            if snapshot.verifies():
                kept.append(snapshot)
                break
    return kept


def kept_deltas(snapshots: list[Checkpoint]) -> Q:
    """The state deltas those snapshots refer to for their large values (docs/DESIGN.md, "Snapshots by
    reference"): they stay with them. Matches nothing when none refers to any."""
    kept = Q(pk__in=[])
    for snapshot in snapshots:
        refs = deltas.referenced(snapshot.state.get("refs") if isinstance(snapshot.state, dict) else None)
        if refs:
            kept |= Q(instance_id=snapshot.instance_id, seq__in=sorted({seq for seq, _ in refs.values()}))
    return kept


def history_rows(model: type[models.Model], fk: str, ids: list[int],
                 kept: list[Checkpoint] | None = None) -> models.QuerySet[Any]:
    """The history rows of `ids` in `model`, but the snapshots `kept` (kept_snapshots(ids), read once by a
    caller that asks for several tables) and the deltas they refer to."""
    rows = model._base_manager.filter(**{f"{fk}_id__in": ids})
    if model is Checkpoint or model is StateDelta:
        kept = kept_snapshots(ids) if kept is None else kept
        if model is Checkpoint:
            return rows.exclude(pk__in=[snapshot.pk for snapshot in kept])
        return rows.exclude(kept_deltas(kept))
    return rows


def has_history(ids: list[int]) -> set[int]:
    with_rows: set[int] = set()
    kept = kept_snapshots(ids)
    for model, fk in history_models():
        with_rows.update(history_rows(model, fk, ids, kept).order_by().values_list(f"{fk}_id", flat=True)
                         .distinct())
    return with_rows


def row_counts(ids: list[int]) -> dict[int, int]:
    """History rows per instance (over every history table)."""
    counts: dict[int, int] = dict.fromkeys(ids, 0)
    kept = kept_snapshots(ids)
    for model, fk in history_models():
        for instance_id, n in (history_rows(model, fk, ids, kept).order_by()
                               .values_list(f"{fk}_id").annotate(n=Count("pk"))):
            counts[instance_id] += n
    return counts


def transactions(ids: list[int]) -> list[list[int]]:
    """`ids` in groups of at most ROWS_PER_TRANSACTION history rows (one instance alone when it has more)."""
    groups: list[list[int]] = []
    rows = 0
    for instance_id, n in row_counts(ids).items():
        if groups and rows + n <= ROWS_PER_TRANSACTION:
            groups[-1].append(instance_id)
            rows += n
        else:
            groups.append([instance_id])
            rows = n
    return groups


def protected(ids: list[int]) -> set[int]:
    """Instances of `ids` whose history must stay: an open review item needs it, or a sub-workflow it
    started is still active."""
    keep: set[int] = set()
    for own, of_step in (ReviewItem.objects.filter(status=ReviewStatus.OPEN)
                         .filter(Q(instance_id__in=ids) | Q(step__instance_id__in=ids))
                         .values_list("instance_id", "step__instance_id")):
        keep.update(i for i in (own, of_step) if i is not None)
    keep.update(WorkflowInstance.objects.filter(parent_step__instance_id__in=ids, status__in=INSTANCE_ACTIVE)
                .values_list("parent_step__instance_id", flat=True))
    return keep & set(ids)


@dataclass
class Cursor:
    """Where the walk over finished instances (finished_at, id order) has got to, in this process, and
    the instances it left for a protection that may end (rechecked on every run)."""

    after: tuple[datetime, int] | None = None
    skipped: set[int] = field(default_factory=set)
    # The walk starts over once a day, in case an instance finished behind it (a worker's clock late by
    # more than the rollup's grace) or the database was replaced under a long-lived scheduler.
    day: date | None = None


CURSOR = Cursor()
SKIPPED_MAX = 10_000


@dataclass
class Report:
    instances: list[int] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    more: bool = False  # stopped on the batch size or the time budget: more may be due now

    def add_rows(self, counts: dict[str, int]) -> None:
        for label, n in counts.items():
            if n:
                self.rows[label] = self.rows.get(label, 0) + n


def cutoff(now: datetime, *, assume_rolled: bool = False) -> datetime | None:
    """Instances that finished before this may lose their history: past retention, on a rolled-up day
    (`assume_rolled`: as if every day that is over were, for a dry run, which writes no rollup)."""
    keep_for = retention()
    last = (now - rollup.ROLL_UP_GRACE).date() - timedelta(days=1) if assume_rolled else rollup.rolled_through()
    if keep_for is None or last is None:
        return None
    return min(now - keep_for, rollup.day_start(last + timedelta(days=1)))


def delete_history(ids: list[int], limit: datetime, *, dry_run: bool = False) -> tuple[list[int], dict[str, int]]:
    """Delete the history of those of `ids` still eligible, re-checked under their row locks, in one
    transaction (`transactions` sizes the groups). Returns the instances and the rows per table
    (counted, not deleted, on a dry run)."""
    counts: dict[str, int] = {}
    with transaction.atomic():
        locked = list(WorkflowInstance.objects.select_for_update().filter(
            pk__in=ids, status__in=INSTANCE_FINAL, finished_at__lt=limit).order_by("pk").values_list("pk", flat=True))
        eligible = sorted(set(locked) - protected(locked))
        if not eligible:
            return [], counts
        kept = kept_snapshots(eligible)  # before any row goes
        for model, fk in history_models():
            rows = history_rows(model, fk, eligible, kept)
            if dry_run:
                counts[model._meta.label_lower] = rows.count()
            else:
                _, per_model = rows.only("pk").delete()
                for label, n in per_model.items():
                    counts[label.lower()] = counts.get(label.lower(), 0) + n
    return eligible, counts


def run(now: datetime, *, batch: int | None = None, budget_s: float = 0.5, dry_run: bool = False,
        cursor: Cursor | None = None) -> Report:
    """Delete the history of up to `batch` instances (STEADYFLOW_RETENTION_BATCH) within about
    `budget_s` of work. A dry run walks its own cursor and deletes nothing."""
    report = Report()
    limit = cutoff(now, assume_rolled=dry_run)
    if limit is None:
        return report
    batch = batch or int(settings.STEADYFLOW["RETENTION_BATCH"])
    cursor = cursor if cursor is not None else (Cursor() if dry_run else CURSOR)
    deadline = clock.monotonic() + budget_s
    if cursor.day != now.date():
        cursor.after, cursor.day = None, now.date()
    if cursor.skipped:  # protections end (a review decided, a child finished): look again
        again = sorted(cursor.skipped)[:batch]
        cursor.skipped.difference_update(again)
        _take(again, limit, report, cursor, dry_run, deadline)
    while len(report.instances) < batch:
        window = WorkflowInstance.objects.filter(status__in=INSTANCE_FINAL, finished_at__lt=limit)
        if cursor.after is not None:
            at, pk = cursor.after
            window = window.filter(Q(finished_at__gt=at) | Q(finished_at=at, pk__gt=pk))
        rows = list(window.order_by("finished_at", "pk").values_list("finished_at", "pk")[:SCAN_WINDOW])
        if not rows:
            break
        candidates = [pk for _, pk in rows]
        with_history = has_history(candidates)
        chosen: list[int] = []
        last = cursor.after  # the last row looked at: the walk resumes after it
        for at, pk in rows:
            if pk in with_history:
                if len(report.instances) + len(chosen) >= batch:
                    report.more = True
                    break
                chosen.append(pk)
            last = (at, pk)
        cursor.after = last
        _take(chosen, limit, report, cursor, dry_run, deadline)
        if report.more:
            break
        if clock.monotonic() > deadline:  # checked after a window: every run makes progress
            report.more = True
            break
    if report.instances and not dry_run:
        log.info("retention: deleted the history of %d instance(s): %s", len(report.instances), report.rows)
    return report


def _take(ids: list[int], limit: datetime, report: Report, cursor: Cursor, dry_run: bool,
          deadline: float) -> None:
    if not ids:
        return
    done: list[int] = []
    groups = transactions(ids)
    for i, group in enumerate(groups):
        if i and clock.monotonic() > deadline:  # out of time: the rest first thing next run
            cursor.skipped.update(pk for rest in groups[i:] for pk in rest)
            report.more = True
            break
        deleted, counts = delete_history(group, limit, dry_run=dry_run)
        done.extend(deleted)
        report.instances.extend(deleted)
        report.add_rows(counts)
    left = set(ids) - set(done) - cursor.skipped
    if left and len(cursor.skipped) < SKIPPED_MAX:
        # Protected now, or reopened: looked at again next run (an instance reopened and finished later
        # is also found again by the walk, at its new finished_at).
        cursor.skipped.update(WorkflowInstance.objects.filter(pk__in=left, status__in=INSTANCE_FINAL)
                              .values_list("pk", flat=True))
