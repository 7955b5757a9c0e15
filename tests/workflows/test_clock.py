"""workflows/clock.py: the database's clock (an offset measured against PostgreSQL's clock_timestamp(),
or SQLite's julianday('now'): the host's system clock as the SQLite library reads it); a skew is logged
once, exported on /metrics and named by health. The end-to-end runs with a worker or scheduler a minute
off are in tests/faults/test_clock_skew.py."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from workflows import clock
from workflows.observability import metrics
from workflows.operators import health

SHIFT_S = 100.0


@pytest.fixture(autouse=True)
def fresh_clock() -> Iterator[None]:
    clock.reset_for_tests()
    yield
    clock.reset_for_tests()


@pytest.fixture
def host_ahead(monkeypatch: pytest.MonkeyPatch) -> float:
    """This process's wall clock SHIFT_S ahead (time.time and timezone.now, as a host's would be)."""
    real_time, real_now = time.time, timezone.now
    monkeypatch.setattr(time, "time", lambda: real_time() + SHIFT_S)
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=SHIFT_S))
    return SHIFT_S


def database_now() -> datetime:
    """The database's own clock, read without this process's (possibly shifted) clock."""
    with connection.cursor() as cursor:
        cursor.execute(clock.CLOCK_QUERIES[connection.vendor])
        seconds = float(cursor.fetchone()[0])
    return datetime.fromtimestamp(seconds, tz=UTC)


@pytest.mark.django_db(transaction=True)
def test_an_accurate_host_measures_no_offset():
    reading = clock.sync()
    assert reading.ok and abs(reading.offset_s) < 0.5 and reading.round_trip_s < 1.0
    assert abs((clock.now() - database_now()).total_seconds()) < 0.5


@pytest.mark.django_db(transaction=True)
def test_a_host_ahead_stamps_the_databases_time_and_warns_once(host_ahead, caplog):
    caplog.set_level(logging.WARNING, logger="steadyflow.clock")
    assert (timezone.now() - database_now()).total_seconds() > SHIFT_S - 1  # the host is off
    stamped = clock.now()  # measures first: outside a transaction
    assert abs((stamped - database_now()).total_seconds()) < 0.5
    assert abs(clock.offset_s() + SHIFT_S) < 0.5
    clock.sync()
    clock.sync()
    warnings = [r.getMessage() for r in caplog.records if r.name == "steadyflow.clock"]
    assert len(warnings) == 1 and f"clock is {SHIFT_S:.1f} s ahead of the database's" in warnings[0]
    samples = metrics.CLOCK_OFFSET.collect()[0].samples
    assert abs(samples[0].value + SHIFT_S) < 0.5


@pytest.mark.django_db(transaction=True)
def test_never_measured_inside_a_transaction(host_ahead, django_assert_num_queries):
    """A failed statement would abort the caller's transaction: inside one, the last offset is used
    (none yet here: the local clock) and the measurement waits for the next call outside."""
    with transaction.atomic():
        with django_assert_num_queries(0):
            inside = clock.now()
    assert (inside - database_now()).total_seconds() > SHIFT_S - 1
    assert abs((clock.now() - database_now()).total_seconds()) < 0.5


@pytest.mark.django_db(transaction=True)
def test_remeasured_after_clock_sync_s(host_ahead, monkeypatch, settings):
    """A host whose clock jumps (a VM resumed from suspend) is corrected at the next measurement."""
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CLOCK_SYNC_S": 0.5}
    clock.now()
    real_time, real_now = time.time, timezone.now
    monkeypatch.setattr(time, "time", lambda: real_time() - 2 * SHIFT_S)  # now 100 s behind
    monkeypatch.setattr(timezone, "now", lambda: real_now() - timedelta(seconds=2 * SHIFT_S))
    time.sleep(0.6)
    assert abs((clock.now() - database_now()).total_seconds()) < 0.5
    assert abs(clock.offset_s() - SHIFT_S) < 0.5


@pytest.mark.django_db(transaction=True)
def test_each_process_offset_is_shown_by_health(host_ahead, redis_conn):
    clock.register("worker")
    report = health.Report(role="all")
    problem = health.check_clocks(redis_conn, report)
    [reading] = [r for r in report.details["clocks"] if r["role"] == "worker"]
    assert abs(reading["offset_s"] + SHIFT_S) < 0.5
    assert problem is not None and "worker" in problem and f"{-SHIFT_S:+.1f} s" in problem
    assert 0 < redis_conn.ttl(next(redis_conn.scan_iter(match=clock.CLOCK_KEY + "*"))) <= clock.reading_ttl_s()


@pytest.mark.django_db(transaction=True)
def test_an_accurate_process_passes_the_health_check(redis_conn):
    clock.register("scheduler")
    report = health.Report(role="all")
    assert health.check_clocks(redis_conn, report) is None
    assert [r["role"] for r in report.details["clocks"]] == ["scheduler"]


@pytest.mark.django_db(transaction=True)
def test_metrics_export_the_offset(host_ahead, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOW, settings.DEBUG = "", [], True
    clock.sync()
    body = Client().get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    found = re.search(r"^steadyflow_clock_offset_seconds(?:\{[^}]*\})? (\S+)$", body, re.M)
    assert found is not None, body[:2000]
    assert abs(float(found.group(1)) + SHIFT_S) < 0.5


def test_settings_are_documented() -> None:
    design = (Path(__file__).resolve().parents[2] / "docs" / "DESIGN.md").read_text()
    for name in ("STEADYFLOW_CLOCK_SYNC_S", "STEADYFLOW_CLOCK_SKEW_WARN_S"):
        assert name in design
