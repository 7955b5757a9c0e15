"""bench/seed.py: the history W1-scale runs over is made of faithful copies of a finished instance."""

from __future__ import annotations

from collections import Counter

import pytest

from bench import workloads as wl
from bench.seed import seed_history
from workflows import runtime
from workflows.models import Checkpoint, Event, StepRun, WorkflowInstance
from workflows.scheduler import inprocess


@pytest.mark.django_db(transaction=True)
def test_seed_copies_a_finished_instance_with_its_steps_events_and_checkpoints(redis_conn):
    version = wl.version_for("bench-seed-chain", wl.chain_graph(3))
    template = runtime.start_instance(version, {"n": 0})
    inprocess.drain()
    template.refresh_from_db()
    assert template.status == "completed"
    steps = StepRun.objects.filter(instance=template).count()
    events = Event.objects.filter(instance=template).count()
    checkpoints = Checkpoint.objects.filter(instance=template).count()
    assert (steps, events, checkpoints) > (0, 0, 0)

    result = seed_history(template.pk, 25, chunk=7)  # 4 chunks, the last one short

    copies = WorkflowInstance.objects.exclude(pk=template.pk)
    assert copies.count() == 25 and result.instances == 25
    assert result.rows == {"workflows_workflowinstance": 25, "workflows_steprun": 25 * steps,
                           "workflows_event": 25 * events, "workflows_checkpoint": 25 * checkpoints,
                           "workflows_statedelta": 0}  # no-op steps change no context
    assert set(copies.values_list("status", flat=True)) == {"completed"}
    assert len(set(copies.values_list("trace_id", flat=True))) == 25
    assert all(len(t) == len(template.trace_id) for t in copies.values_list("trace_id", flat=True))
    assert set(copies.values_list("idempotency_key", flat=True)) == {None}
    # Every copy has the template's rows, under its own id, and lies in the past of the template.
    for table, model in (("steps", StepRun), ("events", Event), ("checkpoints", Checkpoint)):
        per_copy = Counter(model.objects.filter(instance__in=copies).values_list("instance_id", flat=True))
        assert set(per_copy.values()) == {{"steps": steps, "events": events, "checkpoints": checkpoints}[table]}
    assert all(c.finished_at < template.finished_at for c in copies)
    # Keys derived from the instance id follow the copy's id, as the engine derives them.
    for step in StepRun.objects.filter(instance__in=copies):
        assert step.idempotency_key == f"{step.instance_id}:{step.node_id}:{step.visit}"
        assert step.trace_id == WorkflowInstance.objects.get(pk=step.instance_id).trace_id
    # An event's step is a step of the same copy.
    linked = Event.objects.filter(instance__in=copies, step__isnull=False)
    assert linked.exists()
    assert all(e.step.instance_id == e.instance_id for e in linked.select_related("step"))
    assert all(c.verifies() for c in Checkpoint.objects.filter(instance__in=copies))

    # New rows after the seeding get ids past the copies (sequences moved on PostgreSQL).
    last_copy = max(copies.values_list("pk", flat=True))
    another = runtime.start_instance(version, {"n": 1})
    assert another.pk > last_copy
    inprocess.drain()
    another.refresh_from_db()
    assert another.status == "completed"
