"""Cron schedules: the next fire times, and the scheduler's tick that fires what is due.

Exactly once per tick, across any number of scheduler processes: firing inserts a ScheduleFire row
for (schedule, fire time), unique, and starts the instance in the same transaction (with the
idempotency key `schedule:<id>:<iso time>` as a second guard). Whoever loses the insert rolls its
savepoint back and moves on; nothing is held in memory.

Catch-up after downtime: a tick is on time while it is at most SCHEDULE_GRACE_S old. Older due ticks
were missed: `skip` runs none of them, `once` runs the most recent one once. Either way the schedule
then waits for its next future tick.

Time zones: the expression is read in the schedule's zone (zoneinfo). At a spring-forward gap a time
that does not exist fires at the first time after the gap; at a fall-back a time that occurs twice
fires once (its first occurrence), like Vixie cron.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from django.conf import settings
from django.db import IntegrityError, transaction

from workflows.engine.priorities import NORMAL, parse_priority
from workflows.runtime import start_instance
from workflows.triggers.models import CatchUp, Schedule, ScheduleFire

log = logging.getLogger("steadyflow.triggers")
UTC = ZoneInfo("UTC")
NEVER_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)  # any instant: whether an expression ever fires


class ScheduleInvalid(ValueError):
    pass


def check(cron: str, zone: str) -> None:
    if not isinstance(cron, str) or len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise ScheduleInvalid(f"{cron!r} is not a cron expression of five fields (minute hour day month weekday)")
    zone_info(zone)
    try:
        # A valid expression may name no existing day (`0 0 30 2 *`): croniter gives up looking.
        croniter(cron, NEVER_REFERENCE).get_next(datetime)
    except CroniterBadDateError:
        raise ScheduleInvalid(f"{cron!r} never fires (no such date)") from None


def zone_info(zone: str) -> ZoneInfo:
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleInvalid(f"{zone!r} is not a time zone (use an IANA name such as Europe/Berlin)") from None


def _ticks(cron: str, zone: str, after: datetime) -> Iterator[datetime]:
    """The ticks strictly after `after`, in UTC; a wall-clock time repeated by a fall-back only once."""
    tz = zone_info(zone)
    it = croniter(cron, after.astimezone(tz))
    while True:
        tick: datetime = it.get_next(datetime)
        if not _repeated(tick, tz):
            yield _utc(tick)


def _repeated(tick: datetime, tz: ZoneInfo) -> bool:
    """Whether the tick is the second occurrence of a wall-clock time a fall-back repeats. (Read from
    the instant: croniter's own `fold` flags are not reliable, get_prev sets fold=1 everywhere.)"""
    return datetime.fromtimestamp(tick.timestamp(), tz).fold == 1


def _utc(tick: datetime) -> datetime:
    # Through the timestamp: astimezone() to the same zone object returns the datetime unchanged,
    # fold flag included.
    return datetime.fromtimestamp(tick.timestamp(), UTC)


def next_times(cron: str, zone: str, after: datetime, count: int = 5) -> list[datetime]:
    ticks = _ticks(cron, zone, after)
    return [next(ticks) for _ in range(count)]


def latest_due(cron: str, zone: str, now: datetime) -> datetime:
    """The most recent tick at or before `now` (UTC)."""
    tz = zone_info(zone)
    it = croniter(cron, (now + timedelta(microseconds=1)).astimezone(tz))
    for _ in range(3):  # at most one repeated time to step over
        tick: datetime = it.get_prev(datetime)
        if not _repeated(tick, tz):
            break
    return _utc(tick)


def create(definition: Any, cron: str, zone: str = "UTC", *, catch_up: str = CatchUp.SKIP,
           start_input: dict[str, Any] | None = None, now: datetime, priority: str = NORMAL) -> Schedule:
    """A schedule from the next future tick, checked as the triggers page, the admin and the API need:
    raises ScheduleInvalid naming the cron expression, time zone, catch-up policy, input or priority at
    fault."""
    check(cron, zone)
    if start_input is not None and not isinstance(start_input, dict):
        raise ScheduleInvalid("the schedule's input must be a JSON object")
    priority = parse_priority(priority, "the schedule's priority")
    if catch_up not in CatchUp.values:
        raise ScheduleInvalid(f"catch-up policy {catch_up!r} is not one of {', '.join(CatchUp.values)}")
    schedule: Schedule = Schedule.objects.create(
        definition=definition, cron=cron, timezone=zone, catch_up=catch_up, input=start_input or {},
        next_fire_at=next_times(cron, zone, now, 1)[0], created_at=now, priority=priority)
    return schedule


def set_enabled(schedule: Schedule, enabled: bool, now: datetime) -> None:
    """Enabling starts from the next future tick (what passed while disabled is not caught up)."""
    schedule.enabled = enabled
    if enabled:
        schedule.next_fire_at = next_times(schedule.cron, schedule.timezone, now, 1)[0]
    schedule.save(update_fields=["enabled", "next_fire_at"])


def fire(schedule: Schedule, tick: datetime, now: datetime, *, missed: bool = False) -> ScheduleFire | None:
    """Fire one tick: the ScheduleFire insert and the start commit together, or neither; None when
    another process fired this tick first (or the definition has nothing to run)."""
    version = schedule.definition.latest_version()
    if version is None or schedule.definition.archived:
        return None
    try:
        with transaction.atomic():
            fired: ScheduleFire = ScheduleFire.objects.create(schedule=schedule, fire_at=tick, missed=missed,
                                                              created_at=now)
            instance = start_instance(version, dict(schedule.input),
                                      idempotency_key=f"schedule:{schedule.pk}:{tick.isoformat()}", now=now,
                                      priority=schedule.priority)
            fired.instance = instance
            fired.save(update_fields=["instance"])
    except IntegrityError:
        return None  # the tick is someone else's
    return fired


def tick(now: datetime) -> int:
    """Fire every enabled schedule's due tick; returns how many this process fired."""
    grace = timedelta(seconds=settings.STEADYFLOW["SCHEDULE_GRACE_S"])
    count = 0
    due = Schedule.objects.select_related("definition").filter(enabled=True, next_fire_at__lte=now)
    for schedule in list(due[:500]):
        try:
            count += _advance(schedule, now, grace)
        except Exception:  # noqa: BLE001 - one broken schedule must not stop the others
            log.exception("schedule %s failed to fire", schedule.pk)
    return count


def _advance(schedule: Schedule, now: datetime, grace: timedelta) -> int:
    assert schedule.next_fire_at is not None
    fired = 0
    tick = latest_due(schedule.cron, schedule.timezone, now)
    if tick >= schedule.next_fire_at:
        on_time = now - tick <= grace
        if on_time or schedule.catch_up == CatchUp.ONCE:
            try:
                fired = 1 if fire(schedule, tick, now, missed=not on_time) is not None else 0
            except Exception:  # noqa: BLE001 - e.g. an input over the payload cap: logged, the tick passes
                log.exception("schedule %s could not start its instance for %s", schedule.pk, tick.isoformat())
    following = next_times(schedule.cron, schedule.timezone, now, 1)[0]
    # Conditional: a process that read an older next_fire_at does not move it back.
    Schedule.objects.filter(pk=schedule.pk, next_fire_at=schedule.next_fire_at).update(
        next_fire_at=following, **({"last_fired_at": tick} if fired else {}))
    return fired
