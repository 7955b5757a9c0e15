"""Cron schedules: next fire times in a time zone (DST both ways), catch-up policies with a fake
clock, and exactly one instance per tick with schedulers racing (threads with their own database
connections, and real `run_scheduler --once` processes)."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, connections

from tests.conftest import chain
from workflows.models import WorkflowInstance
from workflows.triggers import schedules
from workflows.triggers.models import Schedule, ScheduleFire

UTC = ZoneInfo("UTC")
GRAPH = chain({"id": "nap", "type": "wait", "config": {"seconds": 3600}})


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC) if "+" not in text else datetime.fromisoformat(text)


def test_next_times_in_a_zone_across_spring_forward() -> None:
    # Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST. 02:30 does not exist that day: it fires at 03:00.
    times = schedules.next_times("30 2 * * *", "Europe/Berlin", at("2026-03-27T12:00:00"), 4)
    assert times == [at("2026-03-28T01:30:00"), at("2026-03-29T01:00:00"), at("2026-03-30T00:30:00"),
                     at("2026-03-31T00:30:00")]


def test_a_repeated_wall_clock_time_fires_once_at_fall_back() -> None:
    # 2026-10-25 03:00 CEST -> 02:00 CET: 02:30 happens twice; the daily job runs once (the first).
    times = schedules.next_times("30 2 * * *", "Europe/Berlin", at("2026-10-23T12:00:00"), 3)
    assert times == [at("2026-10-24T00:30:00"), at("2026-10-25T00:30:00"), at("2026-10-26T01:30:00")]
    hourly = schedules.next_times("0 * * * *", "Europe/Berlin", at("2026-10-24T22:30:00"), 3)
    assert hourly == [at("2026-10-24T23:00:00"), at("2026-10-25T00:00:00"), at("2026-10-25T02:00:00")]


def test_invalid_expressions_and_zones_are_refused() -> None:
    for cron in ("every minute", "* * * *", "* * * * * *", "61 * * * *"):
        with pytest.raises(schedules.ScheduleInvalid):
            schedules.check(cron, "UTC")
    with pytest.raises(schedules.ScheduleInvalid, match="is not a time zone"):
        schedules.check("* * * * *", "Mars/Olympus")


@pytest.fixture
def version(make_version: Any) -> Any:
    return make_version(GRAPH, slug="nightly")


def fired(schedule: Schedule) -> list[tuple[datetime, bool]]:
    return [(f.fire_at, f.missed) for f in ScheduleFire.objects.filter(schedule=schedule).order_by("fire_at")]


def test_a_tick_fires_once_and_waits_for_the_next(version: Any) -> None:
    schedule = schedules.create(version.definition, "*/15 * * * *", "UTC", start_input={"n": 1},
                                now=at("2026-05-01T10:01:00"))
    assert schedule.next_fire_at == at("2026-05-01T10:15:00")
    assert schedules.tick(at("2026-05-01T10:14:59")) == 0
    assert schedules.tick(at("2026-05-01T10:15:00.5")) == 1
    assert schedules.tick(at("2026-05-01T10:15:01")) == 0  # the same tick again: nothing
    assert schedules.tick(at("2026-05-01T10:30:02")) == 1
    assert fired(schedule) == [(at("2026-05-01T10:15:00"), False), (at("2026-05-01T10:30:00"), False)]
    instance = ScheduleFire.objects.filter(schedule=schedule).first().instance  # type: ignore[union-attr]
    assert instance.input == {"n": 1}
    assert instance.idempotency_key == f"schedule:{schedule.pk}:2026-05-01T10:30:00+00:00"
    schedule.refresh_from_db()
    assert schedule.next_fire_at == at("2026-05-01T10:45:00")
    assert schedule.last_fired_at == at("2026-05-01T10:30:00")


def test_catch_up_skip_runs_none_of_the_missed_ticks(version: Any) -> None:
    schedule = schedules.create(version.definition, "0 * * * *", "UTC", catch_up="skip",
                                now=at("2026-05-01T09:30:00"))
    # The scheduler was down from before 10:00 until 13:20: 10:00..13:00 were missed.
    assert schedules.tick(at("2026-05-01T13:20:00")) == 0
    assert fired(schedule) == []
    schedule.refresh_from_db()
    assert schedule.next_fire_at == at("2026-05-01T14:00:00")
    assert schedules.tick(at("2026-05-01T14:00:01")) == 1


def test_catch_up_once_runs_the_most_recent_missed_tick_once(version: Any) -> None:
    schedule = schedules.create(version.definition, "0 * * * *", "UTC", catch_up="once",
                                now=at("2026-05-01T09:30:00"))
    assert schedules.tick(at("2026-05-01T13:20:00")) == 1
    assert schedules.tick(at("2026-05-01T13:20:01")) == 0
    assert fired(schedule) == [(at("2026-05-01T13:00:00"), True)]
    assert schedules.tick(at("2026-05-01T14:00:00")) == 1
    assert fired(schedule)[-1] == (at("2026-05-01T14:00:00"), False)


def test_a_late_tick_within_the_grace_is_on_time(version: Any, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "SCHEDULE_GRACE_S": 60.0}
    schedule = schedules.create(version.definition, "0 * * * *", "UTC", now=at("2026-05-01T09:30:00"))
    assert schedules.tick(at("2026-05-01T10:00:59")) == 1
    assert fired(schedule) == [(at("2026-05-01T10:00:00"), False)]


def test_disabled_schedules_do_not_fire_and_reenabling_does_not_catch_up(version: Any) -> None:
    schedule = schedules.create(version.definition, "0 * * * *", "UTC", catch_up="once",
                                now=at("2026-05-01T09:30:00"))
    schedules.set_enabled(schedule, False, at("2026-05-01T09:31:00"))
    assert schedules.tick(at("2026-05-01T10:00:00")) == 0
    schedules.set_enabled(schedule, True, at("2026-05-01T12:10:00"))
    assert schedules.tick(at("2026-05-01T12:10:01")) == 0
    assert schedules.tick(at("2026-05-01T13:00:00")) == 1
    assert fired(schedule) == [(at("2026-05-01T13:00:00"), False)]


def test_a_zoned_schedule_fires_at_local_time(version: Any) -> None:
    schedule = schedules.create(version.definition, "0 9 * * 1-5", "America/New_York",
                                now=at("2026-03-06T20:00:00"))  # a Friday, 15:00 EST
    # Monday 2026-03-09 is after the US spring-forward (03-08): 09:00 EDT = 13:00 UTC.
    assert schedule.next_fire_at == at("2026-03-09T13:00:00")
    assert schedules.tick(at("2026-03-09T13:00:00")) == 1
    schedule.refresh_from_db()
    assert schedule.next_fire_at == at("2026-03-10T13:00:00")


def test_the_unique_tick_holds_even_when_next_fire_at_is_stale(version: Any) -> None:
    """A second scheduler that read the schedule before the first advanced it still cannot fire the tick."""
    schedule = schedules.create(version.definition, "0 * * * *", "UTC", now=at("2026-05-01T09:30:00"))
    stale = Schedule.objects.get(pk=schedule.pk)
    assert schedules.tick(at("2026-05-01T10:00:00")) == 1
    assert schedules.fire(stale, at("2026-05-01T10:00:00"), at("2026-05-01T10:00:01")) is None
    assert WorkflowInstance.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_schedulers_racing_fire_each_tick_once(make_version: Any) -> None:
    """Two threads, each with its own database connection, tick the same 20 due schedules at the same
    moment, three ticks running: exactly one fire and one instance per (schedule, tick)."""
    version = make_version(GRAPH, slug="raced")
    created = [schedules.create(version.definition, "*/5 * * * *", "UTC", now=at("2026-05-01T09:59:00"))
               for _ in range(20)]
    counts: list[int] = []
    errors: list[BaseException] = []
    for now in (at("2026-05-01T10:00:00"), at("2026-05-01T10:05:00"), at("2026-05-01T10:10:00")):
        barrier = threading.Barrier(2)

        def run(now: datetime = now, barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait()
                counts.append(schedules.tick(now))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=run) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert sum(counts) == 60, counts
    assert ScheduleFire.objects.count() == 60
    assert WorkflowInstance.objects.filter(definition_id=version.definition_id).count() == 60
    for schedule in created:
        assert len(fired(schedule)) == 3
    assert connection.vendor in ("postgresql", "sqlite")


def test_two_scheduler_processes_fire_each_tick_once(processes: Any, make_version: Any) -> None:
    """Real `manage.py run_scheduler --once` processes started together on 30 due schedules."""
    from django.utils import timezone

    version = make_version(GRAPH, slug="procs")
    now = timezone.now()
    # Hourly, at the current minute: due now (the tick is less than a minute old, on time), and the next tick
    # an hour away. With "* * * * *" two processes straddling a minute's boundary each fired a tick of their
    # own (two different ticks, rightly), and the test read that as a double fire.
    cron = f"{now.minute} * * * *"
    for _ in range(30):
        schedule = schedules.create(version.definition, cron, "UTC", now=now)
        Schedule.objects.filter(pk=schedule.pk).update(next_fire_at=schedules.latest_due(cron, "UTC", now))
    procs = [processes.start("run_scheduler", "--once") for _ in range(2)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0, processes.logs()
    per_schedule = {s.pk: len(fired(s)) for s in Schedule.objects.filter(definition=version.definition)}
    assert set(per_schedule.values()) == {1}, per_schedule
    assert WorkflowInstance.objects.filter(definition_id=version.definition_id).count() == 30


def test_a_tick_that_cannot_start_is_logged_and_passes(version: Any, settings: Any, caplog: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "MAX_PAYLOAD_BYTES": 1024}
    schedule = schedules.create(version.definition, "0 * * * *", "UTC", start_input={"blob": "x" * 2000},
                                now=at("2026-05-01T09:30:00"))
    assert schedules.tick(at("2026-05-01T10:00:00")) == 0
    assert "could not start its instance" in caplog.text
    schedule.refresh_from_db()
    assert schedule.next_fire_at == at("2026-05-01T11:00:00")  # not retried every tick
    assert not ScheduleFire.objects.exists()  # the fire row rolled back with the start
