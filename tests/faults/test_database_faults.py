"""The database connection dies under a worker: killed mid-step (pg_terminate_backend), or cut right
after a COMMIT that succeeded, so the worker is told it failed. PostgreSQL only: both faults are
PostgreSQL server and wire-protocol events."""

from __future__ import annotations

import time
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection

import tests.faults.functions  # noqa: F401 - registers faults.* functions in this process
from tests.conftest import chain, database_url_for_tests, wait_for
from tests.faults.conftest import (
    check_effects,
    check_history,
    full_logs,
    http,
    py,
    record,
    start,
    statuses,
    step_of,
    wait_all,
)
from tests.faults.pgproxy import CommitAckDropper

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: the faults are pg_terminate_backend and a COMMIT acknowledgement lost "
                    "on the PostgreSQL wire protocol (set DATABASE_URL=postgres://...)")


def worker_database_url(*, port: int | None = None, **options: str) -> str:
    """The test database's URL, optionally through another port and with libpq options."""
    parts = urlsplit(database_url_for_tests())
    netloc = parts.netloc if port is None else f"{parts.netloc.rsplit(':', 1)[0]}:{port}"
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def test_database_connection_killed_mid_step(processes, sink):
    """pg_terminate_backend on every connection of a worker while its handler runs: the worker's
    commit fails, and it commits again on a fresh connection while its lease holds. The handler's
    side effect is not repeated."""
    [instance] = start(chain(http("call", sink, delay=1.0), http("next", sink)))
    victim = "sf-fault-victim"
    worker = processes.worker("io", env={"DATABASE_URL": worker_database_url(application_name=victim)})
    processes.scheduler()
    key = f"{instance.pk}:call:1"
    sink.wait_for_key(key)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE application_name = %s", [victim])
        killed = cursor.fetchone()[0]
    killed_at = time.monotonic()
    assert killed >= 1

    wait_all([instance], "completed")
    recovery = time.monotonic() - killed_at
    assert worker.poll() is None, "the worker reconnects instead of dying"
    history = check_history(instance)
    effects = check_effects(sink, [instance], exact=True)
    assert step_of(instance, "call").attempt == 1
    assert "committing its outcome failed" in full_logs(processes)
    record("database connection killed mid-step", status=instance.status, connections_killed=killed,
           call_attempts=step_of(instance, "call").attempt, steps=history.steps, **effects,
           recovery_s=round(recovery, 2))


@pytest.mark.parametrize("blackout_s", [0.0, 3.0], ids=["database-back-at-once", "database-away-3s"])
def test_commit_succeeds_but_the_worker_is_told_it_failed(processes, sink, blackout_s):
    """The COMMIT recording a step's outcome lands, but the connection drops before the worker hears
    so: it sees a database error. It commits again on a new connection and finds the step no longer
    its own (its first commit landed), so nothing is committed twice and the handler never re-runs
    (its key reached the sink once). The successors the lost commit created are not lost: the one it
    claimed for inline running is adopted by the same worker, the one queued on another queue (never
    enqueued: the transaction "failed") is re-dispatched by the reconciler.

    With the database away for longer than the worker retries (half a lease), the worker gives up
    (logged once; its job ends without a traceback). The outcome stands; the inline successor, claimed
    for a worker that never heard of it, is taken back when its lease expires and retried."""
    host_port = urlsplit(database_url_for_tests()).netloc.rsplit("@", 1)[-1]
    host, _, port = host_port.partition(":")
    proxy = CommitAckDropper(host or "127.0.0.1", int(port or 5432), blackout_s=blackout_s)
    try:
        through_proxy = worker_database_url(port=proxy.port, sslmode="disable", gssencmode="disable")
        arm = py("arm", "faults.arm_commit_drop", {"sink": sink.url()})
        # Successor on the same queue: claimed inline in the very transaction whose ack is lost.
        inline = start(chain(arm, http("after", sink, queue="default")))
        # Successor on another queue: queued in that transaction, never enqueued.
        other = start(chain(arm, http("after", sink)))
        instances = inline + other
        processes.worker("io")
        processes.scheduler()
        worker = processes.worker("default", env={"DATABASE_URL": through_proxy})
        wait_for(lambda: proxy.dropped_acks == 2, timeout=60, message="two lost COMMIT acknowledgements")
        lost_at = time.monotonic()
        for instance in instances:
            assert step_of(instance, "arm").status == "succeeded"  # the commit did land
        wait_all(instances, "completed")
        recovery = time.monotonic() - lost_at
    finally:
        proxy.stop()

    assert worker.poll() is None
    logs = full_logs(processes)
    assert "committing its outcome failed" in logs, "the worker was to see its commit fail"
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=True)
    for instance in instances:
        assert step_of(instance, "arm").attempt == 1
    if blackout_s:
        # The worker gave up, said so once (no job traceback), and the lease brought `after` back.
        assert logs.count("gave up committing its outcome after") == 1  # at most once a minute
        assert "Traceback" not in logs
        assert step_of(inline[0], "after").attempt == 2
        retried = inline[0].events.filter(type="step_retrying", payload__error__code="lease_expired")
        assert retried.count() == 1
    else:
        assert "lease lost, outcome discarded" in logs, "its retry was to find the outcome already committed"
        assert "its outcome had committed; carrying on with step" in logs
        assert all(step_of(i, "after").attempt == 1 for i in instances)
    record(f"commit succeeds, caller told it failed (ack lost, database away {blackout_s:g} s)",
           instances=len(instances),
           statuses=statuses(instances), acks_dropped=proxy.dropped_acks,
           inline_successor_attempts=step_of(inline[0], "after").attempt,
           steps=sum(h.steps for h in histories), **effects, recovery_s=round(recovery, 2))
