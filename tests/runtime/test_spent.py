"""A decision made on a shared in-memory instance and not written spends it: the other claims of the
same round (they share the object) must not decide from it again (PostgreSQL's unlocked commit)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection  # noqa: F401 - read by the skipif condition
from django.db.models import F

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.workflows.support import edge, py
from workflows import runtime
from workflows.models import StepRun, WorkflowInstance
from workflows.store import is_spent
from workflows.workers import dispatch

pytestmark = pytest.mark.skipif("connection.vendor != 'postgresql'")


def two_branches_joined() -> dict[str, Any]:
    return {"nodes": [{"id": "start", "type": "start"}, py("a", "tests.echo"), py("b", "tests.echo"),
                      py("join", "tests.echo"), {"id": "end", "type": "end"}],
            "edges": [edge("start", "a"), edge("start", "b"), edge("a", "join"), edge("b", "join"),
                      edge("join", "end")]}


@pytest.mark.django_db(transaction=True)
def test_a_failed_unlocked_commit_spends_the_shared_instance(make_version, monkeypatch, settings):
    from workflows.store.postgres import PostgresStore

    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": "sql"}
    jobs: list[tuple[int, str]] = []
    monkeypatch.setattr(dispatch, "enqueue_steps", lambda items, **options: jobs.extend(items) or len(items))
    instance = runtime.start_instance(make_version(two_branches_joined()), {})
    a, b = runtime.claim_steps([step_id for step_id, _ in jobs], "w")
    assert a.instance is b.instance and a.fresh and b.fresh

    unlocked: list[bool] = []
    original = PostgresStore._commit_unlocked

    def first_loses(self: PostgresStore, units: Any) -> bool:
        if not unlocked:
            # Another transition moves the instance between a's decision and its commit (and is
            # undone afterwards, so the event log keeps its numbering for the assertions below).
            unlocked.append(False)
            WorkflowInstance.objects.filter(pk=instance.pk).update(event_seq=F("event_seq") + 1)
            result = original(self, units)
            WorkflowInstance.objects.filter(pk=instance.pk).update(event_seq=F("event_seq") - 1)
            assert result is False
            return result
        unlocked.append(True)
        return original(self, units)

    monkeypatch.setattr(PostgresStore, "_commit_unlocked", first_loses)
    runtime.finish_step(a, runtime.run_claimed(a))
    assert unlocked == [False] and is_spent(b.instance)
    # b's outcome is decided under the lock, from the instance as the database holds it.
    runtime.finish_step(b, runtime.run_claimed(b))
    assert unlocked == [False], "b must not try the unlocked commit from the spent instance"
    join = StepRun.objects.get(instance_id=instance.pk, node_id="join")
    assert join.status in ("queued", "running")
    instance.refresh_from_db()
    seqs = list(instance.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, instance.event_seq + 1))
