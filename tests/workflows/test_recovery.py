"""Snapshots and deltas: each context change writes a delta that verifies; a corrupt snapshot is
skipped for an older one plus the deltas after it, a corrupt delta stops the replay; both reported."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import chain
from workflows import runtime
from workflows.models import Checkpoint, Event, StateDelta
from workflows.scheduler import inprocess
from workflows.scheduler.recovery import latest_valid_checkpoint, restore_instance

FN = {"function": "examples.lookup_order"}


@pytest.mark.django_db(transaction=True)
def test_steps_write_deltas_snapshots_verify_and_a_corrupt_snapshot_falls_back_without_loss(
        make_version, redis_conn, capsys, settings):
    # A snapshot at every transition that changed the context (a and b), besides the end's.
    settings.STEADYFLOW = {**settings.STEADYFLOW, "SNAPSHOT_EVERY_EVENTS": 1}
    version = make_version(chain({"id": "a", "type": "python", "config": FN},
                                 {"id": "b", "type": "python", "config": FN}))
    instance = runtime.start_instance(version, {"x": 1})
    inprocess.drain()
    instance.refresh_from_db()
    assert instance.status == "completed"
    final = instance.context
    assert len(final["observations"]) == 2
    deltas = list(StateDelta.objects.filter(instance=instance).order_by("seq"))
    assert len(deltas) == 2 and all(d.verifies() for d in deltas)  # a's and b's context updates
    assert set(deltas[0].delta["set"]) == {"observations"} and deltas[0].delta["unset"] == []
    checkpoints = list(Checkpoint.objects.filter(instance=instance).order_by("seq"))
    assert len(checkpoints) == 2  # a, b (b's commit also completes the instance); the start has none
    assert all(c.verifies() for c in checkpoints)
    newest = checkpoints[-1]
    assert newest.state["context"] == final and newest.state["status"] == "completed"

    # Corrupt the newest one as a bad disk or a hand edit would: the instance's context is still
    # the older snapshot plus the deltas after it, nothing lost.
    Checkpoint.objects.filter(pk=newest.pk).update(state={**newest.state, "context": {"x": 666}})
    found = latest_valid_checkpoint(instance.pk)
    assert found.checkpoint.pk == checkpoints[-2].pk and found.corrupt == [newest.seq]
    assert type(instance).objects.get(pk=instance.pk).context == final

    # The instance row's context column is not the state: damaging it changes nothing.
    type(instance).objects.filter(pk=instance.pk).update(context={"garbage": True})
    restore_instance(instance.pk)
    instance = type(instance).objects.get(pk=instance.pk)
    assert instance.context == final
    types = list(Event.objects.filter(instance=instance).values_list("type", flat=True))
    assert "checkpoint_corrupt" in types and "instance_restored" in types

    # The restore wrote a fresh snapshot of the restored state on top.
    call_command("recover", str(instance.pk))
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint_seq"] > newest.seq and out["corrupt_seqs"] == [] and out["restored"] is False


@pytest.mark.django_db(transaction=True)
def test_a_corrupt_delta_stops_the_replay_before_it_and_is_reported(make_version, redis_conn):
    version = make_version(chain({"id": "a", "type": "python", "config": FN},
                                 {"id": "b", "type": "python", "config": FN}))
    instance = runtime.start_instance(version, {"x": 1})
    inprocess.drain()
    first, second = StateDelta.objects.filter(instance=instance).order_by("seq")
    # Only the end's snapshot exists; corrupt it and b's delta: a's delta over the creation context.
    Checkpoint.objects.filter(instance=instance).update(checksum="0" * 64)
    StateDelta.objects.filter(pk=second.pk).update(delta={"set": {"observations": []}, "unset": []})
    found = restore_instance(instance.pk)
    assert found.corrupt_delta == second.seq and found.replayed == 1
    instance = type(instance).objects.get(pk=instance.pk)
    assert instance.context == {"x": 1, **first.delta["set"]}
    payloads = list(Event.objects.filter(instance=instance, type="checkpoint_corrupt")
                    .values_list("payload", flat=True))
    assert {"delta_seq": second.seq} in payloads


@pytest.mark.django_db
def test_recover_command_errors():
    with pytest.raises(CommandError, match="no instance 999"):
        call_command("recover", "999")

