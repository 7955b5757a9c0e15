"""What one step's commit sends and writes (issue 18, item 4): all of a unit's events in one INSERT,
the fired edges on the step's own step_succeeded event (no edges_taken row), and nothing about the
step's output or usage repeated in its event when there is nothing to say."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.store import graphs
from tests.store.driver import Driver
from workflows.models import Event, StepRun
from workflows.store import statements as sql

pytestmark = pytest.mark.django_db(transaction=True)

TRANSACTION_CONTROL = ("BEGIN", "COMMIT")


def _writes_event(statement: str) -> bool:
    return statement.startswith(f"INSERT INTO {sql.EVENT} ")


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The statements of every batch the SQL store of this database sends, in order (PostgreSQL's
    one-statement commit of a unit counts as a batch of that one statement)."""
    from workflows.store.postgres import PostgresStore
    from workflows.store.sqlite import SqliteStore

    store_class = PostgresStore if connection.vendor == "postgresql" else SqliteStore
    original = store_class.run_batch
    sent: list[list[str]] = []

    def run_batch(self: Any, batch: list[tuple[str, Sequence[Any]]]) -> list[Any]:
        sent.append([statement for statement, _ in batch])
        return original(self, batch)

    monkeypatch.setattr(store_class, "run_batch", run_batch)
    if store_class is PostgresStore:
        one = PostgresStore.unit_statement

        def unit_statement(self: Any, unit: Any) -> tuple[str, list[Any]]:
            statement, params = one(self, unit)
            sent.append([statement])
            return statement, params

        monkeypatch.setattr(PostgresStore, "unit_statement", unit_statement)
    return sent


def test_a_chain_step_commits_with_one_event_insert(
        driver: Driver, use_store: Callable[[str], None], make_version: Callable[..., Any],
        batches: list[list[str]]) -> None:
    use_store("sql")
    instance = driver.start(make_version(graphs.chain()), {"x": 1})
    claim = driver.claim(driver.take("a"))
    assert claim is not None
    batches.clear()
    inline = driver.finish(claim, driver.run(claim))
    assert inline is not None and inline.step.node_id == "b"
    # a's outcome, b claimed inline: the instance, a's step, b's new step, both events (one INSERT)
    # and the context key a set (its state delta). Before: three event INSERTs (edges_taken too).
    if connection.vendor == "postgresql":
        # Outside a transaction: all of it in one statement (autocommit), no BEGIN or COMMIT.
        (batch,) = batches
        assert batch == [sql.pg_commit_unit(("u", "n", "d"), (-1, 0))]
    else:
        (batch,) = [b for b in batches if any(_writes_event(s) for s in b)]
        writes = [s for s in batch if s not in TRANSACTION_CONTROL]
        assert len(writes) == 5, writes
        assert sum(_writes_event(s) for s in writes) == 1
    events = list(Event.objects.filter(instance_id=instance.pk).order_by("seq").values_list("type", "node_id"))
    assert events[-2:] == [("step_succeeded", "a"), ("step_started", "b")]
    b = StepRun.objects.get(instance_id=instance.pk, node_id="b")
    assert inline.step.pk == b.pk and b.status == "running"
    assert Event.objects.get(instance_id=instance.pk, type="step_started", node_id="b").step_id == b.pk


def test_fired_edges_ride_on_the_step_succeeded_event(driver: Driver, store_name: str,
                                                       make_version: Callable[..., Any]) -> None:
    instance = driver.start(make_version(graphs.chain()), {"x": 1})
    driver.drain()
    rows = list(Event.objects.filter(instance_id=instance.pk).order_by("seq").values_list("type", "node_id",
                                                                                           "payload"))
    assert not [r for r in rows if r[0] == "edges_taken"]
    succeeded = {node: payload for type_, node, payload in rows if type_ == "step_succeeded"}
    # Edges are numbered in the graph's order: start->a 0, a->b 1, b->c 2, c->end 3.
    assert {node: p.get("edges") for node, p in succeeded.items()} == {
        "start": [0], "a": [1], "b": [2], "c": [3], "end": None}
    # Python steps without usage and not degraded: neither is repeated in the event (the step row has both).
    assert all("usage" not in succeeded[n] and "degraded" not in succeeded[n] for n in "abc")
    assert StepRun.objects.get(instance_id=instance.pk, node_id="a").usage is None


def test_the_orm_store_writes_a_units_events_in_one_insert(driver: Driver, use_store: Callable[[str], None],
                                                            make_version: Callable[..., Any]) -> None:
    use_store("orm")
    driver.start(make_version(graphs.chain()), {"x": 1})
    claim = driver.claim(driver.take("a"))
    assert claim is not None
    outcome = driver.run(claim)
    with CaptureQueriesContext(connection) as queries:
        driver.finish(claim, outcome)
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith(f'INSERT INTO "{sql.EVENT}"')]
    assert len(inserts) == 1, inserts
