"""The post-commit effects are the runtime's (workflows/runtime/effects.py), not the store's: a store
writes a unit and nothing follows from it; the runtime's write registers the unit's effects (commit
observers, jobs, the live notice, sub-workflow effects) to run after COMMIT, and a rollback runs none."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.workflows.support import py
from workflows import clock, runtime
from workflows import store as stores
from workflows.engine.statuses import InstanceStatus
from workflows.live import notices as live
from workflows.models import StepRun, WorkflowInstance
from workflows.runtime import effects, observe


class Seen:
    def __init__(self) -> None:
        self.committed: list[int] = []
        self.published: list[tuple[int, int, int]] = []
        self.actions: list[tuple[Any, ...]] = []

    def observer(self, unit: Any) -> None:
        self.committed.append(unit.instance.pk)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch, jobs: list[tuple[int, str]]) -> Any:
    found = Seen()
    monkeypatch.setattr(live, "publish_commit", lambda *notice: found.published.append(notice))
    observe.add_observer(found.observer)
    effects.register("test_effect", lambda *args: found.actions.append(args))
    yield found
    observe.remove_observer(found.observer)
    effects.actions.pop("test_effect", None)


def a_unit(instance_id: int) -> runtime.UnitOfWork:
    """A decided transition on the locked instance: its queued step put back as the runtime would
    requeue it, an event, and a named post-commit effect."""
    inst = runtime.lock(instance_id)
    step = StepRun.objects.get(instance_id=instance_id, status="queued")
    uow = runtime.UnitOfWork(inst, runtime.graph_for_version(inst.version_id), clock.now())
    uow.update_step(step, due_at=uow.now)
    uow.event("step_queued", step.node_id, step, visit=step.visit, queue=step.queue)
    uow.dispatch(step)
    uow.after_commit("test_effect", instance_id)
    return uow


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_a_store_writes_the_unit_and_nothing_follows(make_version, seen, jobs, settings, store):
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    inst = runtime.start_instance(make_version(chain(py("a", "tests.echo"))), {})
    jobs.clear()
    seen.published.clear()
    seen.committed.clear()
    with transaction.atomic():
        unit = a_unit(inst.pk)
        stores.get_store().apply(unit)
    assert WorkflowInstance.objects.get(pk=inst.pk).event_seq == unit.instance.event_seq  # written
    assert (jobs, seen.published, seen.committed, seen.actions) == ([], [], [], [])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_the_runtime_runs_the_effects_after_commit_and_none_on_rollback(make_version, seen, jobs, settings,
                                                                        store):
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    inst = runtime.start_instance(make_version(chain(py("a", "tests.echo"))), {})
    step = StepRun.objects.get(instance=inst, status="queued")
    jobs.clear()
    seen.published.clear()
    seen.committed.clear()

    with pytest.raises(RuntimeError), transaction.atomic():
        runtime.apply(a_unit(inst.pk))
        raise RuntimeError("rolled back")
    assert (jobs, seen.published, seen.committed, seen.actions) == ([], [], [], [])

    with transaction.atomic():
        unit = a_unit(inst.pk)
        runtime.apply(unit)
        assert (jobs, seen.published, seen.committed, seen.actions) == ([], [], [], [])  # not yet
    seq = unit.instance.event_seq
    assert [pk for pk, _ in jobs] == [step.pk]
    assert seen.published == [(inst.pk, seq, seq)]
    assert seen.committed == [inst.pk]
    assert seen.actions == [(inst.pk,)]


@pytest.mark.django_db(transaction=True)
def test_a_failed_effect_is_logged_and_the_rest_still_run(make_version, seen, jobs, caplog):
    inst = runtime.start_instance(make_version(chain(py("a", "tests.echo"))), {})

    def broken(*args: Any) -> None:
        raise ValueError("boom")

    effects.register("test_broken", broken)
    try:
        with transaction.atomic():
            unit = a_unit(inst.pk)
            unit.effects.insert(0, ("test_broken", ()))
            runtime.apply(unit)
    finally:
        effects.actions.pop("test_broken", None)
    assert "sub-workflow effect test_broken failed" in caplog.text
    assert seen.actions == [(inst.pk,)]
    assert WorkflowInstance.objects.get(pk=inst.pk).status == InstanceStatus.RUNNING
