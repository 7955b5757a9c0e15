"""The runtime driven in-process on every store (test wrapped in a transaction: on PostgreSQL the SQL
store takes its locked path here; test_equivalence.py covers the one-round-trip path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.store import scenarios
from tests.store.driver import Driver, snapshot
from tests.store.scenarios import SCENARIOS
from tests.workflows.support import assert_history_consistent
from workflows.models import WorkflowInstance
from workflows.store import get_store


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_on_each_store(scenario: str, store_name: str, db: None, driver: Driver,
                                version: Callable[[dict[str, Any]], Any]) -> None:
    assert get_store().name in ({"orm"} if store_name == "orm" else {"sqlite", "postgresql"})
    case = SCENARIOS[scenario]
    instance_id = case.run(driver, version(case.graph()))
    instance = WorkflowInstance.objects.get(pk=instance_id)
    assert_history_consistent(instance)
    shot = snapshot(instance_id, driver.captured)
    # The live view was told of every event, in order, once: the commits' seq ranges tile the log.
    told = [seq for first, last in shot["announced"] for seq in range(first, last + 1)]
    assert told == [e["seq"] for e in shot["events"]]
    # Nothing is left running; a final instance has no open review item, a halted one exactly one.
    assert all(s["status"] != "running" for s in shot["steps"])
    still_open = [r for r in shot["reviews"] if r["status"] == "open"]
    assert len(still_open) == (1 if instance.status == "halted" else 0), shot["reviews"]


def test_start_with_an_idempotency_key_returns_the_first_instance(store_name: str, db: None, driver: Driver,
                                                                  version: Callable[..., Any]) -> None:
    from tests.store import graphs
    from workflows import runtime

    v = version(graphs.chain())
    with driver.committing():
        first = runtime.start_instance(v, {"x": 1}, idempotency_key="order-1")
        again = runtime.start_instance(v, {"x": 2}, idempotency_key="order-1")
    assert again.pk == first.pk
    assert WorkflowInstance.objects.count() == 1
    assert len(driver.captured.dispatched) == 1


def test_an_idempotency_key_is_scoped_to_its_workflow(store_name: str, db: None, driver: Driver,
                                                      version: Callable[..., Any]) -> None:
    from tests.store import graphs

    first, second = version(graphs.chain(), slug="keyed-a"), version(graphs.chain(), slug="keyed-b")
    got = scenarios.keyed_starts(driver, first, second)
    a, b = got["a"], got["b"]
    assert a.pk != b.pk, "the same key on another workflow returned the other workflow's instance"
    assert (a.definition_id, b.definition_id) == (first.definition_id, second.definition_id)
    assert (got["a_again"].pk, got["b_again"].pk) == (a.pk, b.pk)
    bulk_a, bulk_b = got["bulk_a"], got["bulk_b"]
    assert bulk_a[0].pk == a.pk and bulk_b[1].pk == b.pk
    assert bulk_a[1].pk != bulk_b[0].pk  # "order-2": new on each workflow
    assert WorkflowInstance.objects.count() == 4
    assert sorted(WorkflowInstance.objects.values_list("definition__slug", "idempotency_key")) == [
        ("keyed-a", "order-1"), ("keyed-a", "order-2"), ("keyed-b", "order-1"), ("keyed-b", "order-2")]
    # The store's own reads carry the definition (the SQL stores hydrate rows by column position).
    with driver.committing():
        locked = get_store().lock_instance(b.pk)
    assert (locked.definition_id, locked.idempotency_key) == (second.definition_id, "order-1")


def test_a_key_that_raced_past_the_lookup_finds_its_twin_on_its_own_workflow(
        store_name: str, db: None, driver: Driver, version: Callable[..., Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another request committed the key between the lookup and the insert: the unique (definition,
    key) refuses the insert and the start returns the twin, never the other workflow's instance."""
    from tests.store import graphs
    from workflows import runtime

    first, second = version(graphs.chain(), slug="raced-a"), version(graphs.chain(), slug="raced-b")
    with driver.committing():
        other = runtime.start_instance(second, {}, idempotency_key="k")
        twin = runtime.start_instance(first, {}, idempotency_key="k")
    assert twin.pk != other.pk
    store = type(get_store())
    looked_up = store.instances_by_keys
    calls = []

    def missing_once(self: Any, definition_id: int, keys: list[str]) -> dict[str, Any]:
        calls.append(definition_id)
        return {} if len(calls) == 1 else looked_up(self, definition_id, keys)

    monkeypatch.setattr(store, "instances_by_keys", missing_once)
    with driver.committing():
        again = runtime.start_instance(first, {}, idempotency_key="k")
    assert again.pk == twin.pk and calls == [first.definition_id, first.definition_id]
    assert WorkflowInstance.objects.count() == 2


def test_a_duplicate_job_claims_nothing(store_name: str, db: None, driver: Driver,
                                        version: Callable[..., Any]) -> None:
    from tests.store import graphs

    inst = driver.start(version(graphs.chain()), {"x": 1})
    step_id = driver.take()
    claim = driver.claim(step_id)
    assert claim is not None
    seq = WorkflowInstance.objects.get(pk=inst.pk).event_seq
    assert driver.claim(step_id) is None
    assert WorkflowInstance.objects.get(pk=inst.pk).event_seq == seq
    driver.carry_on(claim)
    assert WorkflowInstance.objects.get(pk=inst.pk).status == "completed"


def test_extend_leases_only_those_still_held(store_name: str, db: None, driver: Driver,
                                             version: Callable[..., Any]) -> None:
    from datetime import timedelta

    from tests.store import graphs
    from workflows.models import StepRun

    driver.start(version(graphs.fan_out_join()))
    first = driver.claim(driver.take("a"), "w1")
    second = driver.claim(driver.take("b"), "w1")
    assert first is not None and second is not None
    now = driver.clock.tick()
    until = now + timedelta(seconds=90)
    store = get_store()
    assert store.extend_leases([], now, until) == 0
    held = [(first.step.pk, first.token), (second.step.pk, "not-our-token"), (10**9, "gone")]
    assert store.extend_leases(held, now, until) == 1
    a, b = StepRun.objects.get(pk=first.step.pk), StepRun.objects.get(pk=second.step.pk)
    assert (a.lease_until, a.heartbeat_at) == (until, now)
    assert b.lease_until == second.step.lease_until and b.heartbeat_at == second.step.heartbeat_at


def test_run_step_is_what_the_driver_does(store_name: str, db: None, driver: Driver,
                                          version: Callable[..., Any]) -> None:
    """runtime.run_step (a worker's job) runs a step and its inline successors, like driver.run_job."""
    from tests.store import graphs
    from workflows import runtime

    inst = driver.start(version(graphs.chain()), {"x": 5})
    with driver.committing():
        assert runtime.run_step(driver.take(), "w") == 3
    assert not driver.captured.queue
    inst.refresh_from_db()
    assert (inst.status, inst.context["order"]) == ("completed", ["a", "b", "c"])
    assert_history_consistent(inst)
