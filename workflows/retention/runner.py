"""One retention run and the scheduler's schedule for it (the package docstring says what runs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from workflows.retention import checkpoints, history, rollup

IDLE_EVERY = timedelta(minutes=5)
RUN_BUDGET_S = 0.5


@dataclass
class Outcome:
    rolled_days: int = 0
    instances: list[int] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    checkpoints: int = 0
    more: bool = False


def run_once(now: datetime, *, dry_run: bool = False, batch: int | None = None, budget_s: float = RUN_BUDGET_S,
             cursor: history.Cursor | None = None) -> Outcome:
    """One run: roll up finished days (not on a dry run), one batch of history, one batch of checkpoints."""
    batch = batch or int(settings.STEADYFLOW["RETENTION_BATCH"])
    rolled = 0 if dry_run else rollup.roll_up_due(now)
    report = history.run(now, batch=batch, budget_s=budget_s, dry_run=dry_run, cursor=cursor)
    pruned = checkpoints.prune(batch, dry_run=dry_run)
    more = report.more or (not dry_run and rollup.next_day(now) is not None)
    return Outcome(rolled_days=rolled, instances=report.instances, rows=report.rows, checkpoints=pruned, more=more)


class Schedule:
    """At most once per IDLE_EVERY of the scheduler's clock, or on the next tick while work is left."""

    def __init__(self) -> None:
        self.next_at: datetime | None = None

    def run_if_due(self, now: datetime) -> int:
        # A clock that went back (a test's or an operator's `now`) does not postpone the run.
        if self.next_at is not None and self.next_at - IDLE_EVERY <= now < self.next_at:
            return 0
        outcome = run_once(now)
        self.next_at = now if outcome.more else now + IDLE_EVERY
        return len(outcome.instances)


schedule = Schedule()
