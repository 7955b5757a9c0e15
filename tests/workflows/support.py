"""Helpers shared by the integration tests: graph pieces and checks of an instance's history."""

from __future__ import annotations

from collections import Counter
from typing import Any

from workflows.engine import deltas as state_deltas
from workflows.models import Event, StepRun, WorkflowInstance

STRUCTURAL = {"start", "end"}


def py(node_id: str, function: str = "tests.record", *, args: dict[str, Any] | None = None,
       **extra: Any) -> dict[str, Any]:
    """A python node calling a registered function."""
    config: dict[str, Any] = {"function": function}
    if args is not None:
        config["args"] = args
    return {"id": node_id, "type": "python", "config": config, **extra}


def edge(source: str, target: str, when: str | None = None) -> dict[str, Any]:
    return {"source": source, "target": target, **({"when": when} if when else {})}


def events(instance: WorkflowInstance, type_: str | None = None, node: str | None = None) -> list[Event]:
    qs = instance.events.order_by("seq")
    if type_:
        qs = qs.filter(type=type_)
    if node is not None:
        qs = qs.filter(node_id=node)
    return list(qs)


def event_types(instance: WorkflowInstance, node: str) -> list[str]:
    return [e.type for e in events(instance, node=node)]


def steps(instance: WorkflowInstance, node: str | None = None) -> list[StepRun]:
    qs = instance.steps.order_by("id")
    if node is not None:
        qs = qs.filter(node_id=node)
    return list(qs)


def path(instance: WorkflowInstance) -> list[str]:
    """Node ids in the order their steps were created."""
    return [s.node_id for s in steps(instance)]


def assert_history_consistent(instance: WorkflowInstance) -> None:
    """What must hold for every instance, whatever its graph or outcome (docs/DESIGN.md, durability contract):
    an event log without gaps, one StepRun per node visit with the `instance:node:visit` key, the
    trace id on every step, and checkpoints whose checksums verify."""
    instance.refresh_from_db()
    log = events(instance)
    assert [e.seq for e in log] == list(range(1, instance.event_seq + 1)), "event seqs have gaps"
    assert log[0].type == "instance_started"

    runs = steps(instance)
    visits = Counter((s.node_id, s.visit) for s in runs)
    assert max(visits.values()) == 1, f"a node visit has several StepRuns: {visits}"
    by_node: dict[str, list[int]] = {}
    for s in runs:
        by_node.setdefault(s.node_id, []).append(s.visit)
        if s.node_id.startswith("tool:"):
            # An llm node's tool call: its key is the llm step's, its round and the call's id.
            parent = next(p for p in runs if p.pk == s.input["parent_step"])
            assert s.idempotency_key == f"{parent.idempotency_key}:round{s.input['round']}:{s.input['call_id']}"
        else:
            assert s.idempotency_key == f"{instance.pk}:{s.node_id}:{s.visit}"
        assert s.trace_id == instance.trace_id
    for node_id, node_visits in by_node.items():
        assert node_visits == list(range(1, len(node_visits) + 1)), f"{node_id} visits {node_visits}"

    # State (docs/DESIGN.md "State: deltas and snapshots"): every delta and snapshot verifies, and
    # the context rebuilt from any snapshot (or the creation context) plus the deltas after it is
    # the instance's context, so a corrupt newer snapshot loses nothing.
    checkpoints = list(instance.checkpoints.order_by("seq"))
    assert all(c.verifies() for c in checkpoints)
    assert len({c.seq for c in checkpoints}) == len(checkpoints)
    deltas = list(instance.deltas.order_by("seq", "id"))
    assert all(d.verifies() for d in deltas)
    bases = [(c.seq, c.state["context"]) for c in checkpoints]
    bases.append((0, WorkflowInstance.objects.filter(pk=instance.pk).values_list("context", flat=True)[0]))
    current = instance.context
    for seq, base in bases:
        rebuilt = dict(base)
        for d in deltas:
            if d.seq > seq:
                state_deltas.apply(rebuilt, d.delta)
        assert rebuilt == current, f"the snapshot at seq {seq} plus the deltas after it is not the context"
    if instance.is_final or instance.status == "halted":
        assert checkpoints, "no snapshot of a stopped instance"
    if instance.is_final:
        latest = checkpoints[-1]
        assert latest.seq == instance.event_seq
        assert latest.state["status"] == instance.status
        assert latest.state["context"] == instance.context
        assert latest.state["open_steps"] == 0


def wait_for_workers(count: int, timeout: float = 30.0) -> None:
    """Wait until `count` RQ workers have registered with Redis (started and listening)."""
    import django_rq
    from rq import Worker

    from tests.conftest import wait_for

    connection = django_rq.get_connection("default")
    wait_for(lambda: Worker.count(connection=connection) >= count, timeout, message=f"{count} worker(s)")


SETTLED = {"completed", "failed", "halted", "cancelled", "compensated"}


def expect_status(instance: WorkflowInstance, status: str, timeout: float = 30.0) -> WorkflowInstance:
    """Wait until the instance settles (any final or halted status), then check it is `status`: a wrong
    outcome fails at once with its reason instead of after the whole timeout."""
    from tests.conftest import wait_for_status

    wait_for_status(instance, SETTLED, timeout)
    assert instance.status == status, f"instance {instance.pk} is {instance.status}: {instance.halt_reason} " \
                                      f"{instance.error}"
    return instance
