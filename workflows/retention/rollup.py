"""The daily rollup: what the daily charts show, per UTC day and definition, kept once the day's history
is gone.

Every figure of a day is attributed to the day its instance finished (`finished_at`, UTC), steps too:
so one instance's figures are all in one row, and a day's row can be written once the day is over
(ROLL_UP_GRACE after midnight, for workers whose clocks run a little behind) and never changes after.
Retention deletes an instance's history only once its day is rolled up (workflows/retention/history.py).

The charts (`daily_series`) read the rollup for every day it covers and compute the other days (today,
days not rolled up yet) from the instances and steps with the same code, `summarize`: a day's figures
are therefore the same whether its history is still there or not. Percentiles come from fixed
histogram buckets (BUCKETS_MS), the same whether read from a rollup row or computed live, so rows of
one day can be summed (all definitions) and still give exact bucket counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import (
    Case,
    CharField,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    Min,
    Sum,
    Value,
    When,
)
from django.db.models.functions import TruncDate
from django.db.models.lookups import LessThanOrEqual

from workflows.engine.nodes import known_kinds, unmeasured_kinds
from workflows.engine.statuses import INSTANCE_FINAL, StepStatus
from workflows.models import StepRun, WorkflowInstance
from workflows.retention.models import DailyRollup

ROLL_UP_GRACE = timedelta(hours=1)
# Upper bounds in ms of the run-time histograms (1-2-5 steps from 1 ms to a day); "inf" past the last.
BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 60_000, 120_000,
              300_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 86_400_000)
DONE_STEPS = (StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.COMPENSATED)


def percentile(hist: dict[str, int], q: float) -> float | None:
    """The upper bound (ms) of the bucket holding the q-quantile; the last bound for "inf"."""
    total = sum(hist.values())
    if not total:
        return None
    rank = q * total
    seen = 0
    for bound in (*map(str, BUCKETS_MS), "inf"):
        seen += hist.get(bound, 0)
        if seen >= rank and seen > 0:
            return float(BUCKETS_MS[-1] if bound == "inf" else int(bound))
    return float(BUCKETS_MS[-1])


@dataclass
class Summary:
    instances: dict[str, int] = field(default_factory=dict)
    steps_ok: int = 0
    steps_failed: int = 0
    step_ms: dict[str, int] = field(default_factory=dict)
    instance_ms: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    cost_usd: Decimal = Decimal(0)

    def add(self, other: Summary) -> None:
        for name in ("instances", "step_ms", "instance_ms"):
            mine: dict[str, int] = getattr(self, name)
            for key, n in getattr(other, name).items():
                mine[key] = mine.get(key, 0) + n
        self.steps_ok += other.steps_ok
        self.steps_failed += other.steps_failed
        self.tokens += other.tokens
        self.cost_usd += other.cost_usd

    @classmethod
    def of_row(cls, row: DailyRollup) -> Summary:
        return cls(instances=dict(row.instances), steps_ok=row.steps_ok, steps_failed=row.steps_failed,
                   step_ms=dict(row.step_ms), instance_ms=dict(row.instance_ms), tokens=row.tokens,
                   cost_usd=Decimal(row.cost_usd or 0))

    def as_chart(self) -> dict[str, Any]:
        return {"instances": dict(sorted(self.instances.items())), "steps_ok": self.steps_ok,
                "steps_failed": self.steps_failed,
                "step_p50_ms": percentile(self.step_ms, 0.5), "step_p95_ms": percentile(self.step_ms, 0.95),
                "instance_p50_ms": percentile(self.instance_ms, 0.5),
                "instance_p95_ms": percentile(self.instance_ms, 0.95),
                "tokens": self.tokens, "cost_usd": str(self.cost_usd.quantize(Decimal("0.000001")))}


def _bucket(start_field: str, end_field: str) -> Case:
    """The histogram bucket of (end - start), computed by the database (BUCKETS_MS, "inf" past them),
    so a day of a million steps is a GROUP BY, not a million rows read into the scheduler."""
    duration = ExpressionWrapper(F(end_field) - F(start_field), output_field=DurationField())
    return Case(*(When(LessThanOrEqual(duration, Value(timedelta(milliseconds=bound), output_field=DurationField())),
                       then=Value(str(bound))) for bound in BUCKETS_MS),
                default=Value("inf"), output_field=CharField())


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def _day(value: date | datetime) -> date:
    return value.astimezone(UTC).date() if isinstance(value, datetime) else value


def summarize(start: datetime, end: datetime) -> dict[tuple[date, int], Summary]:
    """Figures of the instances that finished in [start, end), keyed (UTC day, definition id): grouped
    and bucketed by the database."""
    out: dict[tuple[date, int], Summary] = {}
    finished = (WorkflowInstance.objects.filter(status__in=INSTANCE_FINAL, finished_at__gte=start,
                                                finished_at__lt=end).order_by()
                .annotate(day=TruncDate("finished_at", tzinfo=UTC), bucket=_bucket("created_at", "finished_at"))
                .values("day", "definition_id", "status", "bucket")
                .annotate(n=Count("id"), tokens_sum=Sum("tokens"), cost_sum=Sum("cost_usd")))
    for row in finished:
        s = out.setdefault((_day(row["day"]), row["definition_id"]), Summary())
        s.instances[row["status"]] = s.instances.get(row["status"], 0) + row["n"]
        s.instance_ms[row["bucket"]] = s.instance_ms.get(row["bucket"], 0) + row["n"]
        s.tokens += int(row["tokens_sum"] or 0)
        s.cost_usd += Decimal(str(row["cost_sum"] or 0))
    structural = [name for name, kind in known_kinds().items() if kind.structural]
    # Waiting steps (a human task, a timer, a child instance) count as steps but their started -> finished
    # is no run time: the p50/p95 histogram leaves them out, as the dashboard's minute chart does.
    waiting = [name for name in unmeasured_kinds() if name not in structural]
    steps = (StepRun.objects.filter(instance__status__in=INSTANCE_FINAL, instance__finished_at__gte=start,
                                    instance__finished_at__lt=end, status__in=DONE_STEPS,
                                    started_at__isnull=False, finished_at__isnull=False)
             .exclude(node_type__in=structural).order_by()
             .annotate(day=TruncDate("instance__finished_at", tzinfo=UTC), bucket=_bucket("started_at", "finished_at"),
                       failed=Case(When(status=StepStatus.FAILED, then=Value(1)), default=Value(0),
                                   output_field=IntegerField()),
                       waited=Case(When(node_type__in=waiting, then=Value(1)), default=Value(0),
                                   output_field=IntegerField()))
             .values("day", "instance__definition_id", "failed", "waited", "bucket").annotate(n=Count("id")))
    for row in steps:
        s = out.setdefault((_day(row["day"]), row["instance__definition_id"]), Summary())
        if row["failed"]:
            s.steps_failed += row["n"]
        else:
            s.steps_ok += row["n"]
        if not row["waited"]:
            s.step_ms[row["bucket"]] = s.step_ms.get(row["bucket"], 0) + row["n"]
    return out


def rolled_through() -> date | None:
    """The last day rolled up: every day up to it is in the rollup (days without instances have no row)."""
    day: date | None = DailyRollup.objects.filter(definition__isnull=True).aggregate(last=Max("day"))["last"]
    return day


def next_day(now: datetime) -> date | None:
    """The oldest day with finished instances that is not rolled up yet and is over (plus the grace)."""
    last = rolled_through()
    finished = WorkflowInstance.objects.filter(status__in=INSTANCE_FINAL, finished_at__isnull=False)
    if last is not None:
        finished = finished.filter(finished_at__gte=day_start(last + timedelta(days=1)))
    first = finished.aggregate(first=Min("finished_at"))["first"]
    if first is None:
        return None
    day: date = first.astimezone(UTC).date()
    return day if day_start(day) + timedelta(days=1) + ROLL_UP_GRACE <= now else None


def roll_up(day: date) -> int:
    """Write `day`'s rows (replacing any): one per definition with instances that day, and the totals row
    (written even for an empty day). Returns the rows written."""
    start = day_start(day)
    figures = summarize(start, start + timedelta(days=1))
    total = Summary()
    rows = []
    for (_, definition_id), s in sorted(figures.items(), key=lambda kv: kv[0][1]):
        total.add(s)
        rows.append(_row(day, definition_id, s))
    rows.append(_row(day, None, total))
    with transaction.atomic():
        DailyRollup.objects.filter(day=day).delete()
        DailyRollup.objects.bulk_create(rows)
    return len(rows)


def _row(day: date, definition_id: int | None, s: Summary) -> DailyRollup:
    return DailyRollup(day=day, definition_id=definition_id, instances=s.instances, steps_ok=s.steps_ok,
                       steps_failed=s.steps_failed, step_ms=s.step_ms, instance_ms=s.instance_ms, tokens=s.tokens,
                       cost_usd=s.cost_usd)


def roll_up_due(now: datetime, max_days: int = 2) -> int:
    """Roll up at most `max_days` finished days, oldest first: how many were."""
    done = 0
    while done < max_days:
        day = next_day(now)
        if day is None:
            break
        roll_up(day)
        done += 1
    return done


def daily_series(now: datetime, days: int, definition_id: int | None = None) -> list[dict[str, Any]]:
    """The last `days` UTC days up to today, oldest first: rolled-up days from the rollup, the others
    computed from the history (the same figures either way)."""
    today = now.astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    last_rolled = rolled_through()
    by_day: dict[date, Summary] = {}
    rows = DailyRollup.objects.filter(day__gte=first, day__lte=today)
    rows = rows.filter(definition_id=definition_id) if definition_id is not None else rows.filter(
        definition__isnull=True)
    for row in rows:
        by_day[row.day] = Summary.of_row(row)
    live_from = first if last_rolled is None else max(first, last_rolled + timedelta(days=1))
    if live_from <= today:
        for (day, def_id), s in summarize(day_start(live_from), day_start(today + timedelta(days=1))).items():
            if definition_id is None or def_id == definition_id:
                by_day.setdefault(day, Summary()).add(s)
    series = []
    for i in range(days):
        day = first + timedelta(days=i)
        series.append({"day": day.isoformat(), **by_day.get(day, Summary()).as_chart()})
    return series
