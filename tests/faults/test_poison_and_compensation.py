"""A poison step (it kills its process on every attempt) halts its instance into review instead of
killing workers forever; a crash during a saga's compensation re-runs the compensation with the same
idempotency key, and the undo happens once."""

from __future__ import annotations

import os
import signal
import time

import pytest

import tests.faults.functions  # noqa: F401 - registers faults.* functions in this process
from tests.conftest import chain, wait_for
from tests.faults.conftest import (
    check_effects,
    check_history,
    children_of,
    http,
    py,
    record,
    start,
    statuses,
    step_of,
    wait_all,
)

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_poison_step_halts_into_review_and_spares_the_workers(processes, sink):
    """The step kills its work horse on each of its 2 attempts: after the second lease expiry the
    instance halts (poison_step) with a review item; the worker lives on and runs other instances."""
    [poison] = start(chain(py("boom", "faults.die", {"sink": sink.url()},
                              retry={"max_attempts": 2, "backoff_s": 0.1})))
    worker = processes.start("run_worker", "default", "--fork")
    processes.scheduler()
    began = time.monotonic()
    wait_all([poison], "halted")
    halted_after = time.monotonic() - began
    [healthy] = start(chain(py("fine", "faults.effect", {"sink": sink.url()})))
    wait_all([healthy], "completed")

    assert worker.poll() is None
    poison.refresh_from_db()
    assert poison.halt_reason == "poison_step"
    assert "lost its worker on all 2 attempt(s)" in poison.error["message"]
    review = poison.reviews.get()
    assert review.reason == "poison_step" and review.status == "open"
    boom = step_of(poison, "boom")
    assert boom.attempt == 2 and sink.deliveries_of(boom.idempotency_key) == 2
    histories = [check_history(i) for i in (poison, healthy)]
    effects = check_effects(sink, [poison, healthy], exact=False)
    record("poison step (kills its horse every attempt)", statuses=statuses([poison, healthy]),
           steps=sum(h.steps for h in histories), **effects, halted_after_s=round(halted_after, 2))


def test_crash_during_compensation(processes, sink):
    """`ship` fails for good, so the saga refunds `charge`. The work horse is SIGKILLed mid-refund:
    the refund re-runs with the same idempotency key, the sink refunds once, the instance ends
    compensated."""
    refund = {"type": "http", "config": {"method": "POST", "url": sink.url("/refund", delay=1.0)},
              "retry": {"max_attempts": 3, "backoff_s": 0.1}}
    [instance] = start(chain(http("charge", sink, compensate=refund),
                             py("ship", "faults.fail", {"message": "out of stock"})))
    io_worker = processes.start("run_worker", "io", "--fork")
    processes.worker("default")
    processes.scheduler()
    refund_key = f"{instance.pk}:compensate:charge:1"
    sink.wait_for_key(refund_key)
    horses = wait_for(lambda: children_of(io_worker.pid), message="the work horse running the refund")
    killed_at = time.monotonic()
    for pid in horses:
        os.kill(pid, signal.SIGKILL)

    wait_all([instance], "compensated")
    recovery = time.monotonic() - killed_at
    assert io_worker.poll() is None
    refund_step = step_of(instance, "compensate:charge")
    assert refund_step.status == "succeeded" and refund_step.attempt == 2
    assert step_of(instance, "charge").status == "compensated"
    assert sink.deliveries_of(refund_key) == 2 and sink.effects[refund_key] == 1
    history = check_history(instance)
    effects = check_effects(sink, [instance], exact=False)
    record("work horse SIGKILL mid-compensation", status=instance.status, steps=history.steps, **effects,
           recovery_s=round(recovery, 2))
