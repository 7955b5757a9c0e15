"""Races made deterministic by patching: a lease taken over between claim and finish, a step that
moves on under the runtime's feet while it decides, and (PostgreSQL) a one-round-trip commit whose
guard fails because another transition committed first."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from tests.store import graphs
from tests.store.conftest import CommitSpy
from tests.store.driver import Driver, snapshot
from tests.workflows.support import assert_history_consistent, events
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import stopping
from workflows.store import get_store


def _lease_taken_over(driver: Driver, version: Callable[..., Any], spy: CommitSpy) -> None:
    inst = driver.start(version(graphs.chain()), {"x": 1})
    claim = driver.claim(driver.take("a"), "w1")
    assert claim is not None
    outcome = driver.run(claim)
    # Another worker took the step over (its claim wrote nothing the instance would notice).
    StepRun.objects.filter(pk=claim.step.pk).update(lease_token="someone-else", worker="w2")
    before = snapshot(inst.pk, driver.captured)
    assert driver.finish(claim, outcome) is None
    assert snapshot(inst.pk, driver.captured) == before
    assert not driver.captured.queue
    step = StepRun.objects.get(pk=claim.step.pk)
    assert (step.status, step.worker, step.output) == ("running", "w2", None)
    if connection.vendor == "postgresql" and not connection.in_atomic_block and get_store().name != "orm":
        # The instance guard held; the step's guard failed, then the locked path found the lease gone.
        assert spy.results == [False]


def test_lease_taken_over_between_claim_and_finish_commits_nothing(store_name: str, transactional_db: None,
                                                                  driver: Driver, version: Callable[..., Any],
                                                                  commit_spy: CommitSpy) -> None:
    _lease_taken_over(driver, version, commit_spy)


def test_lease_taken_over_inside_a_transaction_commits_nothing(store_name: str, db: None, driver: Driver,
                                                               version: Callable[..., Any],
                                                               commit_spy: CommitSpy) -> None:
    _lease_taken_over(driver, version, commit_spy)
    assert not commit_spy.results


def _step_moved_while_deciding(driver: Driver, version: Callable[..., Any],
                               monkeypatch: pytest.MonkeyPatch) -> int:
    """b waits for a retry when a fails for good; while the runtime decides to cancel b, the scheduler
    promotes b (retrying -> queued). The write of b's cancellation is then stale: the outcome must be
    decided again and commit once, b cancelled."""
    graph = {
        "nodes": [{"id": "start", "type": "start"},
                  {"id": "a", "type": "python", "config": {"function": "storetests.boom"}},
                  {"id": "b", "type": "python", "config": {"function": "storetests.flaky", "args": {"failures": 1}},
                   "retry": {"max_attempts": 2, "backoff_s": 10, "jitter": False}},
                  {"id": "end", "type": "end"}],
        "edges": [{"source": "start", "target": "a"}, {"source": "start", "target": "b"},
                  {"source": "a", "target": "end"}, {"source": "b", "target": "end"}],
    }
    inst = driver.start(version(graph))
    driver.run_job(driver.take("b"))
    assert StepRun.objects.get(instance=inst, node_id="b").status == "retrying"
    claim = driver.claim(driver.take("a"))
    assert claim is not None
    outcome = driver.run(claim)

    from workflows.scheduler import reconciler

    original = stopping.cancel_open_steps
    decided = []

    def then_promoted(uow: Any, reason: str) -> None:
        original(uow, reason)
        decided.append(reason)
        if len(decided) == 1:
            assert reconciler.promote_due(driver.clock.now + timedelta(seconds=20)) == 1

    monkeypatch.setattr(stopping, "cancel_open_steps", then_promoted)
    assert driver.finish(claim, outcome) is None
    assert len(decided) == 2, "the stale decision was not made again"
    inst.refresh_from_db()
    assert (inst.status, inst.open_steps) == ("failed", 0)
    b = StepRun.objects.get(instance=inst, node_id="b")
    assert b.status == "cancelled"
    assert [e.type for e in events(inst, node="a")][-1] == "step_failed"
    assert len(events(inst, "step_failed")) == 1
    assert len(events(inst, "instance_failed")) == 1
    assert_history_consistent(inst)
    return inst.pk


def test_a_step_moved_while_deciding_is_decided_again(store_name: str, db: None, driver: Driver,
                                                      version: Callable[..., Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _step_moved_while_deciding(driver, version, monkeypatch)


def test_a_step_moved_while_deciding_outside_a_transaction(store_name: str, transactional_db: None,
                                                           driver: Driver, version: Callable[..., Any],
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           commit_spy: CommitSpy) -> None:
    _step_moved_while_deciding(driver, version, monkeypatch)
    if connection.vendor == "postgresql" and store_name == "sql":
        # b's retry committed in one round trip; a's outcome found b moved on and took the locked path.
        assert commit_spy.results == [True, False]


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_optimistic_commit_losing_the_race_commits_once_through_the_locked_path(
        transactional_db: None, use_store: Callable[[str], None], driver: Driver, version: Callable[..., Any],
        commit_spy: CommitSpy, monkeypatch: pytest.MonkeyPatch) -> None:
    from workflows.store.postgres import PostgresStore

    use_store("sql")
    inst = driver.start(version(graphs.fan_out_join()))
    claim = driver.claim(driver.take("a"), "w1")
    assert claim is not None
    outcome = driver.run(claim)
    other_job = driver.take("b")
    guarded = PostgresStore._commit_unlocked  # the spy's wrapper
    raced: list[Any] = []

    def racing(self: PostgresStore, unit: Any) -> bool:
        if not raced:
            # Between the decision (made on the instance as a's claim left it) and its commit, another
            # worker's claim moves the instance's event seq on.
            raced.append(driver.claim(other_job, "w2"))
        return guarded(self, unit)

    monkeypatch.setattr(PostgresStore, "_commit_unlocked", racing)
    assert driver.finish(claim, outcome) is None
    assert commit_spy.results == [False], "the guard did not fail, or the locked path was not taken"
    a = StepRun.objects.get(pk=claim.step.pk)
    assert (a.status, a.attempt, a.worker) == ("succeeded", 1, "w1")
    assert len(events(inst, "step_succeeded", "a")) == 1
    (succeeded,) = events(inst, "step_succeeded", "a")
    assert succeeded.payload["edges"]  # its fired edges, recorded once with it
    inst.refresh_from_db()
    assert inst.event_seq == max(e.seq for e in events(inst))
    assert inst.state["joins"]["join"]  # a's input to the join was recorded once
    assert_history_consistent(inst)
    # Both go on as usual: b (claimed in the race) commits, c and the join follow.
    (second,) = raced
    driver.carry_on(second)
    driver.drain()
    inst.refresh_from_db()
    assert inst.status == "completed", inst.error
    assert StepRun.objects.get(instance=inst, node_id="join").output["seen"] == ["a", "b", "c"]
    assert WorkflowInstance.objects.get(pk=inst.pk).open_steps == 0
    assert_history_consistent(inst)
