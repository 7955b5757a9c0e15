"""One clock for every process: the database's (docs/DESIGN.md, *Time*).

Every time another process will compare — lease expiry and heartbeats, `due_at` of timers and
retries, deadlines, TTLs, schedule ticks, `started_at`/`finished_at` — is taken from `now()`. On
PostgreSQL that is this host's clock corrected by an offset to the database server's clock, measured
at start and again every CLOCK_SYNC_S: `SELECT clock_timestamp()` bracketed by two local readings,
the server's reading against their midpoint (its error is at most half the round trip, well under
a millisecond on a LAN, against leases of seconds). With SQLite every process is on one host, and the
database's clock is that host's system clock as the SQLite library reads it (`julianday('now')`): the
offset, measured the same way, is ~0 unless something shifts a process's own view of the time (what
tests/faults/test_clock_skew.py does to a worker or the scheduler, on both databases).

A process whose offset is more than CLOCK_SKEW_WARN_S logs a warning once and carries on: its
timestamps are the database's, so it works correctly. The offset is exported as the gauge
`steadyflow_clock_offset_seconds` and, for the processes that `register()` a role (workers, the ai
consumer, the scheduler), written to Redis for `manage.py health` (workflows/operators/health.py).

Measuring never happens inside a transaction (a failed statement would abort it) and never raises:
with the database away the last offset stays in use and the next call tries again a second later.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

log = logging.getLogger("steadyflow.clock")

CLOCK_KEY = "steadyflow:clock:"  # + host:pid; value: Reading.as_json(), expiring (reading_ttl_s)
# The database's clock as epoch seconds, one statement per database.
CLOCK_QUERIES = {
    "postgresql": "SELECT extract(epoch FROM clock_timestamp())::float8",
    "sqlite": "SELECT (julianday('now') - 2440587.5) * 86400.0",  # milliseconds: SQLite's resolution
}
RETRY_AFTER_FAILURE_S = 1.0


@dataclass
class Reading:
    offset_s: float = 0.0  # the database's clock minus this host's
    round_trip_s: float = 0.0
    measured: float | None = None  # time.monotonic() of the last attempt; None: never
    ok: bool = False


_reading = Reading()
_lock = threading.Lock()
_role: str | None = None
_warned = False


def now() -> datetime:
    """The current time on the database's clock."""
    reading = _reading
    if reading.measured is None or time.monotonic() - reading.measured > _sync_every_s(reading):
        _sync_if_safe()
        reading = _reading
    local = timezone.now()
    return local + timedelta(seconds=reading.offset_s) if reading.offset_s else local


def timestamp() -> float:
    """now() as epoch seconds (heartbeats kept in Redis)."""
    return now().timestamp()


def offset_s() -> float:
    return _reading.offset_s


def register(role: str) -> None:
    """This process is a worker / ai consumer / scheduler: measure now (a skew is logged at start) and
    publish each measurement for `manage.py health`."""
    global _role
    _role = role
    sync()


def sync() -> Reading:
    """Measure the offset now (outside a transaction); on failure keep the previous one."""
    global _reading
    if not _lock.acquire(blocking=False):
        return _reading  # another thread of this process is measuring
    try:
        reading = _measure()
        if reading.ok:
            _reading = reading
            _report(reading)
        else:
            _reading = Reading(_reading.offset_s, _reading.round_trip_s, reading.measured, False)
        return _reading
    finally:
        _lock.release()


def _sync_every_s(reading: Reading) -> float:
    from django.conf import settings

    if not reading.ok and reading.measured is not None:
        return RETRY_AFTER_FAILURE_S
    return float(settings.STEADYFLOW.get("CLOCK_SYNC_S", 10.0))


def _sync_if_safe() -> None:
    from django.db import connection

    if connection.vendor not in CLOCK_QUERIES:
        _reading.measured = time.monotonic()
        _reading.ok = True
        return
    if connection.in_atomic_block or not _idle(connection):
        return  # measured at the next call outside a transaction
    sync()


def _idle(connection: Any) -> bool:
    """No transaction open on the raw connection (the SQL store opens its own with BEGIN)."""
    raw = connection.connection
    if raw is None:
        return True
    if connection.vendor == "sqlite":
        return not raw.in_transaction
    from psycopg.pq import TransactionStatus

    return bool(raw.info.transaction_status == TransactionStatus.IDLE)


def _measure() -> Reading:
    from django.db import DatabaseError, connection

    started = time.monotonic()
    query = CLOCK_QUERIES.get(connection.vendor)
    if query is None:
        return Reading(0.0, 0.0, started, True)
    try:
        with connection.cursor() as cursor:
            before = time.time()
            cursor.execute(query)
            after = time.time()
            server = float(cursor.fetchone()[0])
    except DatabaseError as exc:
        log.debug("could not read the database's clock: %s", exc)
        return Reading(measured=started, ok=False)
    return Reading(offset_s=server - (before + after) / 2, round_trip_s=after - before, measured=started, ok=True)


# Told each measured offset: the metrics module adds its gauge (workflows/observability/metrics.py), so this
# leaf imports nothing of the layers above it.
listeners: list[Any] = []


def _report(reading: Reading) -> None:
    global _warned
    from django.conf import settings

    warn_s = float(settings.STEADYFLOW.get("CLOCK_SKEW_WARN_S", 5.0))
    if abs(reading.offset_s) > warn_s and not _warned:
        _warned = True
        direction = "behind" if reading.offset_s > 0 else "ahead of"
        log.warning("this host's clock is %.1f s %s the database's (more than %g s, "
                    "STEADYFLOW_CLOCK_SKEW_WARN_S): timestamps use the database's clock; fix the host's "
                    "time sync (NTP)", abs(reading.offset_s), direction, warn_s)
    for listener in listeners:
        try:
            listener(reading.offset_s)
        except Exception:  # noqa: BLE001 - a metric never stops the clock
            log.debug("could not pass the clock offset on", exc_info=True)
    if _role is not None:
        _publish(reading)


def reading_ttl_s() -> int:
    from django.conf import settings

    return max(30, int(3 * float(settings.STEADYFLOW.get("CLOCK_SYNC_S", 10.0))))


def _publish(reading: Reading) -> None:
    """Best effort: Redis may be away (the reading is published again at the next measurement)."""
    try:
        import django_rq

        host, pid = socket.gethostname(), os.getpid()
        value = {"role": _role, "host": host, "pid": pid, "offset_s": round(reading.offset_s, 3),
                 "round_trip_s": round(reading.round_trip_s, 4), "at": time.time() + reading.offset_s}
        django_rq.get_connection("default").set(f"{CLOCK_KEY}{host}:{pid}", json.dumps(value),
                                                ex=reading_ttl_s())
    except Exception as exc:  # noqa: BLE001 - Redis away: health shows no reading for this process
        log.debug("could not publish the clock offset: %s", exc)


def reset_for_tests() -> None:
    global _reading, _role, _warned
    _reading, _role, _warned = Reading(), None, False
