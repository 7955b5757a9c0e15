"""A host whose clock is a minute off: one worker or the scheduler runs with its whole process's wall
clock shifted by -60 s or +60 s (tests/faults/skewed_clock/sitecustomize.py). Every shared time is
the database's (workflows/clock.py), so every step still finishes exactly once, no lease is taken
back, retries and timers fire on time, and the skew is logged and shown by `health`.

On both databases: on PostgreSQL the processes measure their offset to the server's clock; on SQLite to
the host's system clock as the SQLite library reads it (the test shifts only the Python process's view
of the time, as a wrong clock would on another host). The clock module's own tests:
tests/workflows/test_clock.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import tests.faults.functions  # noqa: F401 - registers faults.* functions in this process
from tests.conftest import chain
from tests.faults.conftest import LEASE_S, check_effects, check_history, full_logs, py, record, start, statuses
from workflows import clock
from workflows.models import Event, StepRun
from workflows.operators import health

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

SKEWED_CLOCK_DIR = Path(__file__).parent / "skewed_clock"
INSTANCES = 6
LONG_STEP_S = LEASE_S + 1.5  # longer than a lease: it lives only because the keeper extends it
TIMER_S = 1.0
RETRY = {"max_attempts": 3, "backoff_s": 1.0, "max_backoff_s": 1.0, "jitter": False}
# A minute's mistake anywhere (a lease born expired, a retry or timer due a minute late) shows here.
SETTLE_WITHIN_S = 75.0  # from the processes' start, on a loaded 2-core machine


def skewed(shift_s: float) -> dict[str, str]:
    """The environment of a process whose whole wall clock is `shift_s` off."""
    return {"PYTHONPATH": str(SKEWED_CLOCK_DIR), "STEADYFLOW_TEST_CLOCK_SHIFT_S": str(shift_s)}


def graph(sink: Any) -> dict[str, Any]:
    """A lease longer than its step, a retry (its due_at stamped by the worker that failed) and a
    timer (its due_at stamped by the worker that deferred it), each judged by the scheduler."""
    return chain(
        py("long", "faults.effect", {"sink": sink.url(), "seconds": LONG_STEP_S}),
        py("flaky", "faults.flaky", retry=RETRY),
        {"id": "timer", "type": "wait", "config": {"seconds": TIMER_S}},
        py("short", "faults.effect", {"sink": sink.url(), "seconds": 0.1}),
    )


def run_and_check(processes: Any, sink: Any, name: str, shift_s: float, skewed_role: str) -> None:
    instances = start(graph(sink), INSTANCES)
    began = time.monotonic()
    if skewed_role == "worker":
        for _ in range(2):
            processes.worker("default", env=skewed(shift_s))
        processes.scheduler()
    else:
        for _ in range(2):
            processes.worker("default")
        processes.scheduler(env=skewed(shift_s))
    deadline = began + SETTLE_WITHIN_S + 30
    pending = list(instances)
    while pending and time.monotonic() < deadline:
        for instance in pending:
            instance.refresh_from_db()
        pending = [i for i in pending if i.status not in ("completed", "failed", "cancelled")]
        time.sleep(0.1)
    settled = time.monotonic() - began
    logs = full_logs(processes)
    assert not pending, f"{len(pending)} instance(s) did not finish in {settled:.0f} s:\n{logs[-6000:]}"
    assert "[skewed clock] this process's wall clock is shifted" in logs, "the clock patch was not applied"

    assert all(i.status == "completed" for i in instances), statuses(instances)
    histories = [check_history(i) for i in instances]
    effects = check_effects(sink, instances, exact=True)
    steps = list(StepRun.objects.filter(instance__in=instances, node_type__in=("python", "wait")))
    attempts = {node: sorted({s.attempt for s in steps if s.node_id == node}) for node in ("long", "flaky", "short")}
    assert attempts == {"long": [1], "flaky": [2], "short": [1]}, attempts
    taken_back = Event.objects.filter(instance__in=instances, type="step_retrying",
                                      payload__error__code="lease_expired").count()
    assert taken_back == 0, "a lease was judged expired although its worker was alive"
    assert "lease lost, outcome discarded" not in logs
    # Times stamped by the skewed process and judged by the others (the database's clock): the timer
    # held for its second and no longer than a few; the retry waited its backoff and no minute more.
    for step in steps:
        if step.node_id == "timer":
            held = (step.finished_at - step.created_at).total_seconds()
            assert TIMER_S - 0.05 <= held < TIMER_S + 10, f"the timer held {held:.2f} s"
        if step.node_id == "flaky":
            failed = Event.objects.get(step_id=step.pk, type="step_retrying")
            waited = (step.started_at - failed.created_at).total_seconds()
            assert RETRY["backoff_s"] - 0.05 <= waited < RETRY["backoff_s"] + 10, f"the retry waited {waited:.2f} s"
        if step.node_id == "long":
            ran = (step.finished_at - step.started_at).total_seconds()
            assert LONG_STEP_S - 0.05 <= ran < LONG_STEP_S + 10, f"the long step ran {ran:.2f} s"
    assert settled < SETTLE_WITHIN_S, f"settled in {settled:.1f} s: something waited a skew out"

    # Visible: the skewed process logged it once, and `health --role all` names it with its offset.
    warned = logs.count("this host's clock is 60.0 s")
    assert warned == (2 if skewed_role == "worker" else 1), f"{warned} skew warnings: one per skewed process"
    report = health.Report(role="all")
    client = _redis()
    problem = health.check_clocks(client, report)
    readings = [r for r in report.details["clocks"] if r["role"] == skewed_role]
    assert readings and all(abs(r["offset_s"] + shift_s) < 1.0 for r in readings), report.details["clocks"]
    assert problem is not None and f"{skewed_role} " in problem and f"{-shift_s:+.1f} s" in problem
    if skewed_role == "scheduler":
        # Its heartbeat is stamped with the database's clock: fresh to a reader on another host.
        assert health.check_scheduler(client, local=False, now=clock.timestamp()) is None
        beat = json.loads(next(client.get(k) for k in client.scan_iter(match=health.SCHEDULER_KEY + "*")))
        assert abs(beat["at"] - clock.timestamp()) < 5
    record(name, instances=len(instances), statuses=statuses(instances), lost=0,
           steps=sum(h.steps for h in histories), duplicate_outcomes=0, lease_takebacks=taken_back,
           **effects, settle_s=round(settled, 1),
           offsets=[r["offset_s"] for r in readings])


def _redis() -> Any:
    import django_rq

    return django_rq.get_connection("default")


@pytest.mark.parametrize("shift_s", [-60.0, 60.0], ids=["worker-60s-behind", "worker-60s-ahead"])
def test_worker_with_a_skewed_clock(processes, sink, shift_s):
    """Two default workers whose clocks are a minute off run every step of six instances exactly
    once: leases, heartbeats, retries' and timers' due_at come from the database's clock."""
    run_and_check(processes, sink, f"worker clock {shift_s:+g} s", shift_s, "worker")


@pytest.mark.parametrize("shift_s", [-60.0, 60.0], ids=["scheduler-60s-behind", "scheduler-60s-ahead"])
def test_scheduler_with_a_skewed_clock(processes, sink, shift_s):
    """A scheduler whose clock is a minute off takes back no live lease (ahead) and makes retries and
    timers due on time (behind)."""
    run_and_check(processes, sink, f"scheduler clock {shift_s:+g} s", shift_s, "scheduler")

