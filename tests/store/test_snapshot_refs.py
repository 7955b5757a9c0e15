"""Snapshots by reference (docs/DESIGN.md, "Snapshots by reference"; store/snapshot_refs.py), on each
store and both databases: a snapshot names each large context value by the delta that set it instead of
copying it; reads follow the references and check each value's digest; a reference that does not lead
to its value makes the snapshot unusable like a failed checksum; retention keeps the deltas a kept
snapshot refers to; a recovery's snapshot copies every value."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from tests.store import graphs
from tests.store.driver import Captured, Clock, Driver
from workflows.engine import deltas
from workflows.engine.functions import FunctionCall, FunctionResult, register_function
from workflows.models import Checkpoint, StateDelta, WorkflowInstance
from workflows.retention import checkpoints as checkpoint_retention
from workflows.retention import history
from workflows.store import context_cache, get_store
from workflows.store.state_reads import creation_context_of, newest_snapshot, rebuild

pytestmark = pytest.mark.django_db(transaction=True)

BIG = 3000  # over the default SNAPSHOT_REF_BYTES (1024)


@register_function("refstests.note")
def note(call: FunctionCall) -> FunctionResult:
    """Sets note_<n> to `size` characters and a small counter; `keep` rewrites note_1 unchanged."""
    n = int(call.args["n"])
    return FunctionResult(output={"n": n}, context={f"note_{n}": f"{n}:" + "y" * int(call.args["size"]),
                                                     "count": n})


def notes_graph(steps: int, size: int = BIG) -> dict[str, Any]:
    return graphs.notes_chain("refstests.note", steps, size)


def expected_context(steps: int, size: int = BIG) -> dict[str, Any]:
    return {"topic": "t", "count": steps, **{f"note_{n}": f"{n}:" + "y" * size for n in range(1, steps + 1)}}


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    context_cache.clear()


def run(driver: Driver, make_version: Callable[..., Any], steps: int, size: int = BIG) -> WorkflowInstance:
    instance = driver.start(make_version(notes_graph(steps, size)), {"topic": "t"})
    driver.drain()
    context_cache.clear()  # every read below goes to the database
    inst = WorkflowInstance.objects.get(pk=instance.pk)
    assert inst.status == "completed"
    return inst


def final_snapshot(inst: WorkflowInstance) -> Checkpoint:
    return Checkpoint.objects.filter(instance=inst).order_by("-seq", "-id").first()  # type: ignore[return-value]


def test_the_final_snapshot_refers_to_the_deltas_and_reads_back_whole(driver: Driver, clock: Clock,
                                                                        captured: Captured, store_name: str,
                                                                        make_version: Callable[..., Any]) -> None:
    inst = run(driver, make_version, 5)
    snapshot = final_snapshot(inst)
    assert snapshot.verifies()
    # Small values inline, each large one as [seq, digest] of the delta that set it.
    assert snapshot.state["context"] == {"topic": "t", "count": 5}
    seqs = {row.delta["set"]["count"]: row.seq for row in StateDelta.objects.filter(instance=inst)}
    assert snapshot.state["refs"] == {f"note_{n}": [seqs[n], deltas.value_digest(expected_context(5)[f"note_{n}"])]
                                      for n in range(1, 6)}
    assert len(json.dumps(snapshot.state)) < 1000  # not the 15 KB of values again
    assert inst.snapshot_bytes < 1000
    assert inst.context == expected_context(5)
    assert rebuild(inst.pk, creation_context_of(inst)).context == expected_context(5)


def test_a_later_snapshot_refers_through_an_earlier_one(driver: Driver, clock: Clock, captured: Captured,
                                                        store_name: str, settings: Any,
                                                        make_version: Callable[..., Any]) -> None:
    # A snapshot every 4 events: the final one finds note_1's delta through the earlier snapshot's refs.
    settings.STEADYFLOW = {**settings.STEADYFLOW, "SNAPSHOT_EVERY_EVENTS": 4}
    inst = run(driver, make_version, 6)
    snapshots = list(Checkpoint.objects.filter(instance=inst).order_by("seq"))
    assert len(snapshots) >= 3
    first_note = StateDelta.objects.get(instance=inst, delta__set__count=1).seq
    assert all(s.state["refs"]["note_1"][0] == first_note for s in snapshots if "note_1" in s.state.get("refs", {}))
    assert snapshots[-1].state["refs"]["note_1"][0] == first_note
    for snapshot in snapshots:  # every one reads back as the context at its seq
        assert rebuild(inst.pk, creation_context_of(inst), upto=snapshot.seq).snapshot.pk == snapshot.pk
    assert inst.context == expected_context(6)


def test_the_threshold_zero_copies_every_value(driver: Driver, clock: Clock, captured: Captured, store_name: str,
                                               settings: Any, make_version: Callable[..., Any]) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "SNAPSHOT_REF_BYTES": 0}
    inst = run(driver, make_version, 3)
    snapshot = final_snapshot(inst)
    assert "refs" not in snapshot.state and snapshot.state["context"] == expected_context(3)


def _tamper_delta(inst: WorkflowInstance, count: int, value: str, *, fix_checksum: bool) -> None:
    row = StateDelta.objects.get(instance=inst, delta__set__count=count)
    delta = {**row.delta, "set": {**row.delta["set"], f"note_{count}": value}}
    checksum = deltas.checksum_of(row.seq, delta) if fix_checksum else row.checksum
    StateDelta.objects.filter(pk=row.pk).update(delta=delta, checksum=checksum)


@pytest.mark.parametrize("fix_checksum", [False, True], ids=["damaged", "another-value"])
def test_a_reference_that_does_not_lead_to_its_value_makes_the_snapshot_unusable(
        driver: Driver, clock: Clock, captured: Captured, store_name: str, settings: Any,
        make_version: Callable[..., Any], fix_checksum: bool) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "SNAPSHOT_EVERY_EVENTS": 4}
    inst = run(driver, make_version, 6)
    newest = final_snapshot(inst)
    # note_5's delta fails its checksum, or (checksum made good) holds another value than the digest says.
    _tamper_delta(inst, 5, "forged", fix_checksum=fix_checksum)
    snapshot, corrupt = newest_snapshot(inst.pk)
    assert newest.seq in corrupt
    assert snapshot is not None and snapshot.seq < newest.seq and "note_5" not in snapshot.resolved_context
    if not fix_checksum:
        # Replay from the older snapshot stops at the damaged delta: nothing forged is ever read.
        found = rebuild(inst.pk, creation_context_of(inst))
        assert found.corrupt_delta is not None and "note_5" not in found.context


def test_retention_keeps_the_deltas_the_kept_snapshot_refers_to(driver: Driver, clock: Clock, captured: Captured,
                                                                store_name: str, settings: Any,
                                                                make_version: Callable[..., Any]) -> None:
    inst = run(driver, make_version, 4)
    referenced = {seq for seq, _ in deltas.referenced(final_snapshot(inst).state["refs"]).values()}
    deleted = history.history_rows(StateDelta, "instance", [inst.pk]).delete()[0]
    assert deleted == 0  # every delta here sets a note the final snapshot refers to
    assert set(StateDelta.objects.filter(instance=inst).values_list("seq", flat=True)) == referenced
    history.history_rows(Checkpoint, "instance", [inst.pk]).delete()
    context_cache.clear()
    assert WorkflowInstance.objects.get(pk=inst.pk).context == expected_context(4)


def test_pruning_an_active_instances_snapshots_keeps_referenced_deltas(driver: Driver, clock: Clock,
                                                                       captured: Captured, store_name: str,
                                                                       settings: Any,
                                                                       make_version: Callable[..., Any]) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "SNAPSHOT_EVERY_EVENTS": 3}
    inst = run(driver, make_version, 8)
    WorkflowInstance.objects.filter(pk=inst.pk).update(status="running", finished_at=None)
    before = Checkpoint.objects.filter(instance=inst).count()
    assert before > 2
    assert checkpoint_retention.prune(10, keep=2) == before - 2
    context_cache.clear()
    assert WorkflowInstance.objects.get(pk=inst.pk).context == expected_context(8)
    for snapshot in Checkpoint.objects.filter(instance=inst):
        assert rebuild(inst.pk, creation_context_of(inst), upto=snapshot.seq).snapshot.pk == snapshot.pk


def test_a_recovery_snapshot_copies_every_value(driver: Driver, clock: Clock, captured: Captured, store_name: str,
                                                make_version: Callable[..., Any]) -> None:
    from workflows.scheduler.recovery import restore_instance

    inst = run(driver, make_version, 3)
    restore_instance(inst.pk)
    snapshot = final_snapshot(WorkflowInstance.objects.get(pk=inst.pk))
    assert "refs" not in snapshot.state and snapshot.state["context"] == expected_context(3)


def test_the_key_seq_statement_names_the_last_delta_setting_each_key(driver: Driver, clock: Clock,
                                                                     captured: Captured, use_store: Any,
                                                                     make_version: Callable[..., Any]) -> None:
    use_store("sql")
    inst = run(driver, make_version, 3)
    seqs = sorted(StateDelta.objects.filter(instance=inst).values_list("seq", flat=True))
    store = get_store()
    assert store.delta_key_seqs(inst.pk, 0) == {"note_1": seqs[0], "note_2": seqs[1], "note_3": seqs[2],
                                                "count": seqs[2]}
    assert store.delta_key_seqs(inst.pk, seqs[0]) == {"note_2": seqs[1], "note_3": seqs[2], "count": seqs[2]}
    # A delta whose "set" is not an object (a damaged row) is passed over, not an error.
    StateDelta.objects.create(instance=inst, seq=seqs[2] + 50, delta={"set": [1], "unset": []}, checksum="0" * 64)
    assert store.delta_key_seqs(inst.pk, seqs[2]) == {}
    assert connection.vendor in ("postgresql", "sqlite")
