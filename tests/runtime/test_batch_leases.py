"""A batch job's steps keep their leases for the whole batch.

A batch job claims several steps of one instance under one lease token and runs them one after
another, committing their outcomes together at the end. While one step runs (an LLM or http call
may take minutes), the others wait: those still to run and those already run whose outcomes are not
yet committed. Their leases must be renewed by the process's heartbeat like the running step's, or
the scheduler takes them back as abandoned and another worker runs them again.

Deterministic: the clock stands still except when the steps move it, and the heartbeat beats and
the scheduler sweeps only when a step says so (no thread, no sleep).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tests.store.driver import Clock
from tests.workflows.support import edge, events, steps
from workflows import runtime
from workflows.engine.functions import FunctionCall, register_function
from workflows.runtime import loop
from workflows.runtime.leases import LeaseKeeper
from workflows.scheduler import reconciler
from workflows.workers import dispatch

LEASE_S = 60.0
ran: Counter[str] = Counter()
during: list[Callable[[FunctionCall], None]] = []  # what the n-th step of the batch does while it runs


@register_function("tests.batch_lease_probe")
def probe(call: FunctionCall) -> dict[str, Any]:
    ran[call.node_id] += 1
    during.pop(0)(call)
    return {"node": call.node_id, "attempt": call.attempt}


class ManualKeeper(LeaseKeeper):
    """The process's lease keeper, beating only when the test calls extend_now()."""

    def _run(self) -> None:
        return None


def fan_out() -> dict[str, Any]:
    probe_node: Callable[[str], dict[str, Any]] = lambda node_id: {  # noqa: E731
        "id": node_id, "type": "python", "config": {"function": "tests.batch_lease_probe"}}
    return {"nodes": [{"id": "start", "type": "start"}, probe_node("a"), probe_node("b"), probe_node("c"),
                      {"id": "end", "type": "end"}],
            "edges": [edge("start", "a"), edge("start", "b"), edge("start", "c"), edge("a", "end"),
                      edge("b", "end"), edge("c", "end")]}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_the_waiting_steps_of_a_batch_keep_their_leases(make_version, monkeypatch, settings, store):
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store, "LEASE_S": LEASE_S}
    clock = Clock()
    monkeypatch.setattr("django.utils.timezone.now", clock)
    monkeypatch.setattr("workflows.clock.now", clock)  # the database clock stands still with it
    jobs: list[tuple[int, str]] = []
    monkeypatch.setattr(dispatch, "enqueue_steps", lambda items, **options: jobs.extend(items) or len(items))
    keeper = ManualKeeper()
    monkeypatch.setattr(loop, "keeper", keeper)
    ran.clear()
    swept: list[int] = []

    def slow_call(call: FunctionCall) -> None:
        # A call of most of a lease: the heartbeat beats meanwhile, then the scheduler sweeps,
        # later than the leases given at the claim (or at the previous beat) and not yet renewed.
        clock.tick(0.9 * LEASE_S)
        keeper.extend_now()
        clock.tick(0.6 * LEASE_S)
        swept.append(reconciler.reclaim_expired_leases(clock.now))

    during[:] = [slow_call, slow_call, slow_call]
    instance = runtime.start_instance(make_version(fan_out()), {})
    batch = [step_id for step_id, _ in jobs]
    assert len(batch) == 3
    jobs.clear()

    assert loop.run_steps(batch, "w") == 3
    assert swept == [0, 0, 0], "the scheduler took back steps of a batch that was still running"
    assert ran == {"a": 1, "b": 1, "c": 1}
    assert not events(instance, "step_retrying")
    for node in ("a", "b", "c"):
        (step,) = steps(instance, node)
        assert (step.status, step.attempt, step.worker) == ("succeeded", 1, "w"), (node, step.error)
    assert keeper.held() == {}


@pytest.mark.django_db(transaction=True)
def test_a_worker_that_stops_mid_batch_loses_every_step_of_it(make_version, monkeypatch, settings):
    """The other side of the heartbeat: a batch whose worker went silent is taken back whole."""
    settings.STEADYFLOW = {**settings.STEADYFLOW, "LEASE_S": LEASE_S}
    jobs: list[tuple[int, str]] = []
    monkeypatch.setattr(dispatch, "enqueue_steps", lambda items, **options: jobs.extend(items) or len(items))
    runtime.start_instance(make_version(fan_out()), {})
    claims = runtime.claim_steps([step_id for step_id, _ in jobs], "w")
    assert len(claims) == 3
    later = claims[0].step.lease_until + timedelta(seconds=1)
    assert reconciler.reclaim_expired_leases(later) == 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_a_discarded_outcome_is_logged_as_its_own_step(make_version, monkeypatch, settings, store, caplog):
    """A batch's commit discards the outcome of a step whose lease was taken over: the log line names
    that step (its id, node, visit, attempt), not the batch's last step, which the worker ran last."""
    import json
    import logging

    from workflows.models import StepRun
    from workflows.observability import logging_setup

    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    jobs: list[tuple[int, str]] = []
    monkeypatch.setattr(dispatch, "enqueue_steps", lambda items, **options: jobs.extend(items) or len(items))
    ran.clear()
    instance = runtime.start_instance(make_version(fan_out()), {})
    batch = [step_id for step_id, _ in jobs]
    nodes = dict(StepRun.objects.filter(pk__in=batch).values_list("pk", "node_id"))
    first, last = nodes[batch[0]], nodes[batch[-1]]

    def take_over_the_first(call: FunctionCall) -> None:
        # Another worker took the first step over while this one ran the last (its lease lapsed).
        StepRun.objects.filter(pk=batch[0]).update(lease_token="someone-else", worker="other")

    during[:] = [lambda call: None, lambda call: None, take_over_the_first]
    caplog.handler.setFormatter(logging_setup.formatter("json"))  # formatted as it is logged
    with caplog.at_level(logging.WARNING, logger="steadyflow.runtime"):
        assert loop.run_steps(batch, "w") == 3

    (record,) = [r for r in caplog.records if "outcome discarded" in r.getMessage()]
    assert record.getMessage().startswith(f"step {batch[0]} (node '{first}'): lease lost")
    (line,) = [json.loads(text) for text in caplog.text.splitlines() if "outcome discarded" in text]
    assert (line["node"], line["instance"], line["visit"], line["attempt"]) == (first, instance.pk, 1, 1)
    assert line["node"] != last
    assert StepRun.objects.get(pk=batch[0]).status == "running"  # the other worker's now
    assert {StepRun.objects.get(pk=pk).status for pk in batch[1:]} == {"succeeded"}
