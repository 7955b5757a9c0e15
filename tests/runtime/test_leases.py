"""One lease thread per worker process: every lease the process holds is extended in one statement."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.workflows.support import edge, py
from workflows import runtime
from workflows.models import StepRun
from workflows.runtime.leases import LeaseKeeper
from workflows.workers import dispatch


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(dispatch, "enqueue_steps", lambda items, **options: sent.extend(items) or len(items))
    return sent


def two_branches() -> dict[str, Any]:
    return {"nodes": [{"id": "start", "type": "start"}, py("a", "tests.echo"), py("b", "tests.echo"),
                      {"id": "end", "type": "end"}],
            "edges": [edge("start", "a"), edge("start", "b"), edge("a", "end"), edge("b", "end")]}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_the_keeper_extends_every_held_lease_and_drops_released_ones(make_version, jobs, settings, store):
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store, "LEASE_S": 60.0}
    runtime.start_instance(make_version(two_branches()), {})
    past = timezone.now() - timedelta(seconds=1)
    claims = runtime.claim_steps([step_id for step_id, _ in jobs], "w", now=past)
    assert len(claims) == 2
    keeper = LeaseKeeper()
    with keeper.holding(claims[0].step.pk, claims[0].token), keeper.holding(claims[1].step.pk, claims[1].token):
        assert keeper.held() == {c.step.pk: c.token for c in claims}
        before = {s.pk: s.lease_until for s in StepRun.objects.filter(pk__in=keeper.held())}
        assert keeper.extend_now() == 2
        after = {s.pk: s.lease_until for s in StepRun.objects.filter(pk__in=before)}
        assert all(after[pk] > before[pk] for pk in before)
    assert keeper.held() == {}
    assert keeper.extend_now() == 0


@pytest.mark.django_db(transaction=True)
def test_a_lease_taken_over_is_not_extended(make_version, jobs):
    runtime.start_instance(make_version(two_branches()), {})
    (claim, _) = runtime.claim_steps([step_id for step_id, _ in jobs], "w")
    StepRun.objects.filter(pk=claim.step.pk).update(lease_token="someone-else")
    keeper = LeaseKeeper()
    with keeper.holding(claim.step.pk, claim.token):
        assert keeper.extend_now() == 0


def test_a_lease_held_twice_stays_held_until_both_holds_end():
    """A batch job holds its steps' leases from claim to commit while each step holds its own as it
    runs: the step's hold ending must not drop the batch's."""
    keeper = LeaseKeeper()
    with keeper.holding_all([(1, "t"), (2, "t")]):
        with keeper.holding(1, "t"):
            assert keeper.held() == {1: "t", 2: "t"}
        assert keeper.held() == {1: "t", 2: "t"}
        with keeper.holding(3, "u"):
            assert keeper.held() == {1: "t", 2: "t", 3: "u"}
        assert keeper.held() == {1: "t", 2: "t"}
    assert keeper.held() == {}
