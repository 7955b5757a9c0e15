"""The ORM store is the reference: the SQL store must write exactly the rows it writes.

Each scenario runs once per store, from the same clock, counters and random seed, in a committed
database (`transactional_db`), so on PostgreSQL the SQL store commits outcomes on its one-round-trip
path (checked with a spy), and the snapshots of the two runs (steps, events, checkpoints, instance,
review items, jobs enqueued and the commits announced to the live view, ids replaced by what they
stand for) must be equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from tests.store.conftest import CommitSpy
from tests.store.driver import Captured, Clock, Driver, differences, fresh_run, snapshot
from tests.store.scenarios import SCENARIOS
from workflows.models import WorkflowInstance
from workflows.store import get_store


def run_on_both(scenario: str, driver: Driver, clock: Clock, captured: Captured, use_store: Callable[[str], None],
                make_version: Callable[..., Any], spy: CommitSpy) -> dict[str, dict[str, Any]]:
    case = SCENARIOS[scenario]
    version = make_version(case.graph(), slug=f"eq-{scenario.replace('_', '-')}")
    shots = {}
    for name in ("orm", "sql"):
        use_store(name)
        fresh_run(clock, captured)
        spy.clear()
        instance_id = case.run(driver, version)
        shots[name] = snapshot(instance_id, captured)
        if name == "orm":
            assert not spy.results and not spy.claims
        elif case.fast_commits:
            assert any(spy.claims), "the SQL store never claimed in one statement"
    return shots


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_inside_a_transaction_too(scenario: str, db: None, driver: Driver, clock: Clock, captured: Captured,
                                  use_store: Callable[[str], None], make_version: Callable[..., Any],
                                  commit_spy: CommitSpy) -> None:
    """The same, with every transition inside the test's transaction: on PostgreSQL, the locked path."""
    shots = run_on_both(scenario, driver, clock, captured, use_store, make_version, commit_spy)
    found = list(differences(shots["orm"], shots["sql"]))
    assert not found, f"{len(found)} difference(s):\n" + "\n".join(found[:40])
    assert not commit_spy.results


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_sql_store_writes_what_the_orm_store_writes(scenario: str, transactional_db: None, driver: Driver,
                                                   clock: Clock, captured: Captured,
                                                   use_store: Callable[[str], None],
                                                   make_version: Callable[..., Any],
                                                   commit_spy: CommitSpy) -> None:
    shots = run_on_both(scenario, driver, clock, captured, use_store, make_version, commit_spy)
    found = list(differences(shots["orm"], shots["sql"]))
    assert not found, f"{len(found)} difference(s):\n" + "\n".join(found[:40])
    assert shots["orm"] == shots["sql"]
    if connection.vendor == "postgresql":
        assert get_store().name == "postgresql"
        if not SCENARIOS[scenario].fast_commits:
            assert not commit_spy.results
        else:
            # Outside a transaction, a worker's outcome commits in one round trip, guarded by the seq.
            assert commit_spy.committed >= 1, commit_spy.results
        if scenario == "interleaved":
            # Each worker committed after the other had moved the instance on: both guards failed.
            assert commit_spy.fell_back >= 2, commit_spy.results


def test_a_snapshot_shows_a_difference(transactional_db: None, driver: Driver, clock: Clock, captured: Captured,
                                       use_store: Callable[[str], None], make_version: Callable[..., Any],
                                       commit_spy: CommitSpy) -> None:
    """The comparison is not vacuous: one changed value in one row shows."""
    from workflows.models import Event, StepRun

    shots = run_on_both("chain", driver, clock, captured, use_store, make_version, commit_spy)
    assert not list(differences(shots["orm"], shots["sql"]))
    instance_id = StepRun.objects.order_by("-id").values_list("instance_id", flat=True).first()
    assert instance_id is not None
    Event.objects.filter(instance_id=instance_id, type="step_succeeded", node_id="b").update(payload={"attempt": 2})
    changed = snapshot(instance_id, captured)
    found = list(differences(shots["orm"], changed))
    assert found and all(line.startswith(".events[") and ".payload" in line for line in found), found
    assert any("attempt: orm 1 != sql 2" in line for line in found), found


@pytest.mark.xfail(condition="connection.vendor == 'sqlite'", strict=True,
                   reason="the SQL store writes context and state with sorted keys (its one canonical "
                          "serialisation, shared with the checkpoint); the ORM store keeps insertion order. "
                          "PostgreSQL's jsonb orders keys itself, so both stores read back alike there.")
def test_context_keys_read_back_in_the_same_order(transactional_db: None, driver: Driver, clock: Clock,
                                                  captured: Captured, use_store: Callable[[str], None],
                                                  make_version: Callable[..., Any]) -> None:
    from tests.store import graphs
    from workflows.models import WorkflowInstance

    version = make_version(graphs.chain())
    keys = {}
    for name in ("orm", "sql"):
        use_store(name)
        fresh_run(clock, captured)
        instance = driver.start(version, {"x": 7, "a": 1})
        driver.drain()
        stored = WorkflowInstance.objects.get(pk=instance.pk)
        keys[name] = (list(stored.context), list(stored.state))
    assert keys["orm"] == keys["sql"]


def test_keyed_starts_agree(transactional_db: None, driver: Driver, clock: Clock, captured: Captured,
                            use_store: Callable[[str], None], make_version: Callable[..., Any]) -> None:
    """Idempotency keys on two workflows, singly and in bulk: each store returns the same instances
    for the same starts and writes the same rows (the definition and the key included)."""
    from tests.store import graphs
    from tests.store.scenarios import keyed_starts

    outcomes = {}
    for name in ("orm", "sql"):
        use_store(name)
        fresh_run(clock, captured)
        first = make_version(graphs.chain(), slug=f"eq-keys-{name}-a")
        second = make_version(graphs.chain(), slug=f"eq-keys-{name}-b")
        got = keyed_starts(driver, first, second)
        made: list[int] = []  # instances in the order they were first returned

        def label(instance: Any, made: list[int] = made) -> int:
            if instance.pk not in made:
                made.append(instance.pk)
            return made.index(instance.pk)

        returned = {start: [label(i) for i in (result if isinstance(result, list) else [result])]
                    for start, result in got.items()}
        which = {first.definition_id: "a", second.definition_id: "b"}
        rows = []
        for instance in (WorkflowInstance.objects.get(pk=pk) for pk in made):
            shot = snapshot(instance.pk)
            for event in shot["events"]:  # each run has definitions of its own: name them alike
                if event["type"] == "instance_started":
                    event["payload"]["definition"] = which[instance.definition_id]
            rows.append({"definition": which[instance.definition_id], "key": instance.idempotency_key, **shot})
        outcomes[name] = (returned, rows)
    assert outcomes["orm"][0] == {"a": [0], "b": [1], "a_again": [0], "b_again": [1], "bulk_a": [0, 2],
                                  "bulk_b": [3, 1]}
    found = list(differences({"rows": outcomes["orm"][1]}, {"rows": outcomes["sql"][1]}))
    assert not found, "\n".join(found[:40])
    assert outcomes["orm"] == outcomes["sql"]
