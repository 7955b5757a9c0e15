"""Starting many instances in one transaction, with one round of enqueues after it."""

from __future__ import annotations

from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.workflows.support import py
from workflows import runtime
from workflows.models import Checkpoint, Event, StepRun, WorkflowInstance
from workflows.workers import dispatch


@pytest.fixture
def enqueues(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[int, str]]]:
    calls: list[list[tuple[int, str]]] = []

    def capture(items: list[tuple[int, str]], **options: Any) -> int:
        calls.append(list(items))
        return len(items)

    monkeypatch.setattr(dispatch, "enqueue_steps", capture)
    return calls


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_many_starts_commit_together_and_enqueue_once(make_version, enqueues, settings, store):
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    version = make_version(chain(py("a", "tests.echo"), py("b", "tests.echo")))
    instances = runtime.start_instances(version, [{"n": n} for n in range(5)])
    assert [i.input for i in instances] == [{"n": n} for n in range(5)]
    assert len(enqueues) == 1 and len(enqueues[0]) == 5
    first_steps = StepRun.objects.filter(node_id="a", status="queued")
    assert sorted(pk for pk, _ in enqueues[0]) == sorted(first_steps.values_list("pk", flat=True))
    for instance in instances:
        instance.refresh_from_db()
        assert instance.status == "running" and instance.event_seq == 3
        # The start's fired edges ride on its step_succeeded event.
        assert list(Event.objects.filter(instance=instance).values_list("type", flat=True)) == [
            "instance_started", "step_succeeded", "step_queued"]
        # The start's context is the instance's creation context: no snapshot until one is due.
        assert not Checkpoint.objects.filter(instance=instance).exists()
        assert instance.context == {"n": instance.input["n"]}
    for step_id, _ in enqueues[0]:
        runtime.run_step(step_id, "w")
    assert set(WorkflowInstance.objects.values_list("status", flat=True)) == {"completed"}


@pytest.mark.django_db(transaction=True)
def test_a_used_idempotency_key_returns_its_instance_and_starts_the_rest(make_version, enqueues):
    version = make_version(chain(py("a", "tests.echo")))
    first = runtime.start_instance(version, {"n": 0}, idempotency_key="k0")
    again = runtime.start_instances(version, [{"n": 0}, {"n": 1}], idempotency_keys=["k0", "k1"])
    assert again[0].pk == first.pk and again[1].input == {"n": 1}
    assert WorkflowInstance.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_one_key_twice_in_one_bulk_start_is_refused(make_version, enqueues):
    version = make_version(chain(py("a", "tests.echo")))
    with pytest.raises(ValueError, match="idempotency key appears twice"):
        runtime.start_instances(version, [{}, {}], idempotency_keys=["same", "same"])
    assert not WorkflowInstance.objects.exists()
