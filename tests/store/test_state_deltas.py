"""State deltas and snapshots (docs/DESIGN.md "State: deltas and snapshots"), on each store: a step
writes the keys it changed and never the whole context; snapshots only when due; the process
cache of committed contexts; the migration of existing instances."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.store import graphs
from tests.store.driver import Captured, Clock, Driver
from workflows.engine.functions import FunctionCall, FunctionResult, register_function
from workflows.models import Checkpoint, StateDelta, WorkflowInstance
from workflows.store import context_cache

pytestmark = pytest.mark.django_db(transaction=True)


@register_function("deltatests.note")
def note(call: FunctionCall) -> FunctionResult:
    n = int(call.args["n"])
    return FunctionResult(output={"n": n}, context={f"note_{n}": "x" * int(call.args.get("size", 1000)),
                                                     "count": n})


def notes_graph(steps: int, size: int = 1000) -> dict[str, Any]:
    return graphs.notes_chain("deltatests.note", steps, size)


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    context_cache.clear()


def test_each_step_writes_only_the_keys_it_changed(driver: Driver, clock: Clock, captured: Captured,
                                                     store_name: str, make_version: Callable[..., Any]) -> None:
    instance = driver.start(make_version(notes_graph(12)), {"topic": "t"})
    driver.drain()
    inst = WorkflowInstance.objects.get(pk=instance.pk)
    assert inst.status == "completed"
    assert inst.context == {"topic": "t", "count": 12, **{f"note_{n}": "x" * 1000 for n in range(1, 13)}}
    # The row's column still holds the creation context: no step rewrote it.
    assert WorkflowInstance.objects.filter(pk=inst.pk).values_list("context", flat=True)[0] == {"topic": "t"}
    rows = list(StateDelta.objects.filter(instance=inst).order_by("seq"))
    assert [sorted(r.delta["set"]) for r in rows] == [sorted({f"note_{n}", "count"}) for n in range(1, 13)]
    assert all(r.verifies() and r.delta["unset"] == [] for r in rows)
    # One snapshot: the end's (12 KB of deltas stay under the default minimum of 1 MiB).
    snapshots = list(Checkpoint.objects.filter(instance=inst))
    assert [s.seq for s in snapshots] == [inst.event_seq] and snapshots[0].state["context"] == inst.context
    assert inst.snapshot_seq == inst.event_seq and inst.delta_bytes == 0
    assert inst.context_bytes == len(__import__("json").dumps(inst.context))


def test_snapshots_come_when_the_deltas_outweigh_the_last_one(driver: Driver, clock: Clock, captured: Captured,
                                                               store_name: str, settings: Any,
                                                               make_version: Callable[..., Any]) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "SNAPSHOT_MIN_BYTES": 3000}
    instance = driver.start(make_version(notes_graph(12)), {"topic": "t"})
    driver.drain()
    inst = WorkflowInstance.objects.get(pk=instance.pk)
    sizes = [(s.seq, len(__import__("json").dumps(s.state["context"])))
             for s in Checkpoint.objects.filter(instance=inst).order_by("seq")]
    # ~1 KB a step: the first after 3 KB of deltas, then each once the deltas since pass its size.
    assert 3 <= len(sizes) <= 5, sizes
    assert all(s.verifies() for s in Checkpoint.objects.filter(instance=inst))
    # Every snapshot, and the creation context, plus the deltas after it, is the context.
    from workflows.store.state_reads import creation_context_of, rebuild

    assert rebuild(inst.pk, creation_context_of(inst)).context == inst.context


def test_the_cache_serves_a_committed_context_by_its_seq_and_copies(driver: Driver, clock: Clock,
                                                                    captured: Captured, store_name: str,
                                                                    make_version: Callable[..., Any],
                                                                    django_assert_max_num_queries: Any) -> None:
    instance = driver.start(make_version(notes_graph(3)), {"topic": "t"})
    driver.drain()
    inst = WorkflowInstance.objects.get(pk=instance.pk)
    with django_assert_max_num_queries(0):
        context = inst.context  # the worker (this process) committed it: no read
    assert context["count"] == 3
    context["count"] = 99  # a reader's copy: the cache is not changed through it
    assert WorkflowInstance.objects.get(pk=inst.pk).context["count"] == 3

    # A stale entry (another seq) is never used: the context is rebuilt from the database.
    context_cache.put(inst.pk, inst.context_seq - 1, 100, {"stale": True})
    context_cache.drop(inst.pk)
    context_cache.put(inst.pk, inst.context_seq + 1, 100, {"stale": True})
    assert WorkflowInstance.objects.get(pk=inst.pk).context["count"] == 3


def test_the_cache_is_bounded_in_bytes(settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CONTEXT_CACHE_BYTES": 1000}
    for n in range(10):
        context_cache.put(n, 1, 300, {"n": n})
    assert context_cache.stats() == {"entries": 3, "bytes": 900}
    assert context_cache.get(0, 1) is None and context_cache.get(9, 1) == {"n": 9}
    context_cache.put(99, 1, 5000, {"big": True})  # larger than the whole cache: not kept
    assert context_cache.get(99, 1) is None


def test_the_migration_makes_the_row_the_snapshot_and_back(transactional_db: None) -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("workflows", "0017_retention_daily_rollup")], [("workflows", "0018_state_deltas")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        apps = executor.loader.project_state(before).apps
        Definition = apps.get_model("workflows", "WorkflowDefinition")
        Version = apps.get_model("workflows", "WorkflowVersion")
        Instance = apps.get_model("workflows", "WorkflowInstance")
        Old = apps.get_model("workflows", "Checkpoint")
        definition = Definition.objects.create(name="m", slug="m")
        version = Version.objects.create(definition=definition, number=1, graph={"nodes": [], "edges": []},
                                         checksum="0" * 64)
        inst = Instance.objects.create(version=version, definition=definition, context={"a": 1, "b": [2]},
                                       state={"visits": {"x": 1}}, max_transitions=10, event_seq=7,
                                       status="running")
        Old.objects.create(instance=inst, seq=5, state={"context": {"a": 0}}, checksum="0" * 64)
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        migrated = WorkflowInstance.objects.get(pk=inst.pk)
        assert migrated.snapshot_seq == migrated.context_seq == 7
        newest = Checkpoint.objects.filter(instance_id=inst.pk).order_by("-seq").first()
        assert newest.seq == 7 and newest.verifies() and newest.state["context"] == {"a": 1, "b": [2]}
        assert migrated.context == {"a": 1, "b": [2]} and migrated.state == {"visits": {"x": 1}}
        # A delta after the migration, then back: the row holds the rebuilt context again.
        from workflows.engine import deltas

        delta = deltas.make({"c": 3}, ["a"])
        StateDelta.objects.create(instance_id=inst.pk, seq=8, delta=delta, checksum=deltas.checksum_of(8, delta))
        executor = MigrationExecutor(connection)
        executor.migrate(before)
        apps = executor.loader.project_state(before).apps
        assert apps.get_model("workflows", "WorkflowInstance").objects.get(pk=inst.pk).context == {"b": [2], "c": 3}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
