"""Checkpoints: every step writes one that verifies; a corrupt one is skipped and reported."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import chain
from workflows import runtime
from workflows.models import Checkpoint, Event
from workflows.scheduler import inprocess
from workflows.scheduler.recovery import latest_valid_checkpoint, restore_instance

FN = {"function": "examples.lookup_order"}


@pytest.mark.django_db(transaction=True)
def test_each_step_checkpoints_and_a_corrupt_one_is_skipped_and_reported(make_version, redis_conn, capsys):
    version = make_version(chain({"id": "a", "type": "python", "config": FN},
                                 {"id": "b", "type": "python", "config": FN}))
    instance = runtime.start_instance(version, {"x": 1})
    inprocess.drain()
    instance.refresh_from_db()
    assert instance.status == "completed"
    checkpoints = list(Checkpoint.objects.filter(instance=instance).order_by("seq"))
    assert len(checkpoints) == 3  # the start, a, b (b's commit also completes the instance)
    assert all(c.verifies() for c in checkpoints)
    newest = checkpoints[-1]
    assert newest.state["context"] == instance.context and newest.state["status"] == "completed"

    # Corrupt the newest one as a bad disk or a hand edit would.
    Checkpoint.objects.filter(pk=newest.pk).update(state={**newest.state, "context": {"x": 666}})
    found = latest_valid_checkpoint(instance.pk)
    assert found.checkpoint.pk == checkpoints[-2].pk and found.corrupt == [newest.seq]

    # Damage the instance row too, then restore it from the newest valid checkpoint.
    type(instance).objects.filter(pk=instance.pk).update(context={"garbage": True})
    restore_instance(instance.pk)
    instance.refresh_from_db()
    assert instance.context == checkpoints[-2].state["context"]
    types = list(Event.objects.filter(instance=instance).values_list("type", flat=True))
    assert "checkpoint_corrupt" in types and "instance_restored" in types

    # The restore wrote a fresh checkpoint of the restored state on top.
    call_command("recover", str(instance.pk))
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint_seq"] > newest.seq and out["corrupt_seqs"] == [] and out["restored"] is False


@pytest.mark.django_db
def test_recover_command_errors():
    with pytest.raises(CommandError, match="no instance 999"):
        call_command("recover", "999")
