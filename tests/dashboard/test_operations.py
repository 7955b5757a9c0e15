"""Operators' actions (workflows/operators/operations.py): retry a failed step, rerun from a node, cancel.

Steps run in this process through runtime.run_step, the function a worker's job calls, against the
real database; the order in which queued steps run is chosen by the test, so a parallel branch can
be left queued while its sibling fails (and is then cut short by the failure)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine.errors import PermanentStepError
from workflows.engine.functions import FunctionCall, FunctionResult, register_function
from workflows.engine.statuses import StepStatus
from workflows.models import AuditEntry, Checkpoint, StepRun, WorkflowInstance
from workflows.operators import operations

# Nodes named here fail (permanently) when they run; tests clear it to let them succeed.
FAILING: set[str] = set()


@register_function("live.flaky")
def flaky(call: FunctionCall) -> FunctionResult:
    if call.node_id in FAILING:
        raise PermanentStepError(f"{call.node_id} is told to fail")
    return note(call)


@register_function("live.broken")
def broken(call: FunctionCall) -> None:
    """A bug in a node's function: an exception the engine did not expect."""
    {}["missing"]


@register_function("live.note")
def note(call: FunctionCall) -> FunctionResult:
    """Output what the context held when the node ran; record the visit in the context."""
    return FunctionResult(output={"node": call.node_id, "visit": call.visit, "saw": sorted(call.context)},
                          context={call.node_id: call.visit})


@pytest.fixture(autouse=True)
def _clear_failing() -> Iterator[None]:
    FAILING.clear()
    yield
    FAILING.clear()


_slugs = itertools.count(1)


def node(node_id: str, function: str = "live.note") -> dict[str, Any]:
    return {"id": node_id, "type": "python", "config": {"function": function}}


def graph(nodes: list[dict[str, Any]], edges: list[tuple[str, str]]) -> dict[str, Any]:
    return {"nodes": [{"id": "start", "type": "start"}, *nodes, {"id": "end", "type": "end"}],
            "edges": [{"source": a, "target": b} for a, b in edges], "settings": {"max_transitions": 50}}


def start(g: dict[str, Any]) -> WorkflowInstance:
    version = save_version(f"ops-{next(_slugs)}", g)
    return runtime.start_instance(version, {"topic": "x"})


def run_queued(instance: WorkflowInstance, only: str | None = None, limit: int = 50) -> WorkflowInstance:
    """Run queued steps (or only those of one node) the way a worker would, until none is left."""
    for _ in range(limit):
        queued = StepRun.objects.filter(instance=instance, status=StepStatus.QUEUED).order_by("id")
        if only:
            queued = queued.filter(node_id=only)
        step = queued.first()
        if step is None:
            break
        runtime.run_step(step.pk, "test-worker")
    instance.refresh_from_db()
    return instance


def runs(instance: WorkflowInstance, node_id: str) -> list[StepRun]:
    return list(StepRun.objects.filter(instance=instance, node_id=node_id).order_by("visit"))


def chain_graph() -> dict[str, Any]:
    return graph([node("a"), node("b", "live.flaky"), node("c")],
                 [("start", "a"), ("a", "b"), ("b", "c"), ("c", "end")])


def fan_graph() -> dict[str, Any]:
    """start -> p, q (parallel) -> j (join all) -> end."""
    return graph([node("p", "live.flaky"), node("q"), node("j")],
                 [("start", "p"), ("start", "q"), ("p", "j"), ("q", "j"), ("j", "end")])


# --- Retry a failed step ------------------------------------------------------------------------

@pytest.mark.django_db
def test_retry_runs_the_same_failed_step_again_and_the_instance_completes() -> None:
    FAILING.add("b")
    inst = run_queued(start(chain_graph()))
    assert inst.status == "failed" and inst.halt_reason == "step_failed"
    failed = runs(inst, "b")[0]
    checkpoints = Checkpoint.objects.filter(instance=inst).count()

    FAILING.clear()
    step = operations.retry_failed_step(inst.pk, note="fixed upstream")
    inst.refresh_from_db()
    assert step.pk == failed.pk and step.status == "queued"
    assert inst.status == "running" and inst.halt_reason == "" and inst.error is None and inst.finished_at is None
    types = list(inst.events.order_by("-seq").values_list("type", flat=True)[:2])
    assert types == ["step_queued", "instance_retried"]
    assert Checkpoint.objects.filter(instance=inst).count() == checkpoints + 1
    audit = AuditEntry.objects.get(instance=inst, action="retry_step")
    assert audit.before["status"] == "failed" and audit.after["status"] == "running"
    assert audit.note == "fixed upstream"

    inst = run_queued(inst)
    assert inst.status == "completed"
    b = runs(inst, "b")
    assert [(s.visit, s.attempt, s.status) for s in b] == [(1, 2, "succeeded")]
    assert b[0].error is None
    assert [s.status for s in runs(inst, "c")] == ["succeeded"]


@pytest.mark.django_db
def test_retry_also_reruns_the_branch_the_failure_cut_short() -> None:
    FAILING.add("p")
    inst = start(fan_graph())
    inst = run_queued(inst, only="p")  # p fails while q is still queued: q is cancelled with the instance
    assert inst.status == "failed"
    assert [s.status for s in runs(inst, "q")] == ["cancelled"]

    FAILING.clear()
    operations.retry_failed_step(inst.pk)
    inst.refresh_from_db()
    assert inst.open_steps == 2
    retried = inst.events.filter(type="instance_retried").get()
    assert retried.payload["rerun"] == ["q"]

    inst = run_queued(inst)
    assert inst.status == "completed", inst.error
    assert [(s.visit, s.status) for s in runs(inst, "q")] == [(1, "cancelled"), (2, "succeeded")]
    assert [(s.visit, s.status) for s in runs(inst, "j")] == [(1, "succeeded")]


@pytest.mark.django_db
def test_retry_refuses_what_it_cannot_retry() -> None:
    inst = run_queued(start(chain_graph()))
    assert inst.status == "completed"
    with pytest.raises(operations.OperationError, match="is completed: only a failed instance"):
        operations.retry_failed_step(inst.pk)

    running = start(chain_graph())
    with pytest.raises(operations.OperationError, match="is running"):
        operations.retry_failed_step(running.pk)

    FAILING.add("b")
    failed = run_queued(start(chain_graph()))
    other = runs(failed, "a")[0]
    with pytest.raises(operations.OperationError, match=f"step {other.pk} is not a failed step"):
        operations.retry_failed_step(failed.pk, step_id=other.pk)
    failed.refresh_from_db()
    assert failed.status == "failed"  # nothing changed


# --- Rerun from a node --------------------------------------------------------------------------

@pytest.mark.django_db
def test_rerun_from_a_node_restores_the_context_of_its_checkpoint_and_runs_a_new_visit() -> None:
    inst = run_queued(start(chain_graph()))
    assert inst.status == "completed"
    assert inst.context == {"topic": "x", "a": 1, "b": 1, "c": 1}

    step = operations.rerun_from_node(inst.pk, "b", note="again")
    inst.refresh_from_db()
    assert (step.node_id, step.visit, step.status) == ("b", 2, "queued")
    assert inst.status == "running" and inst.finished_at is None
    # The checkpoint taken when b was first activated: a's update, not b's or c's.
    assert inst.context == {"topic": "x", "a": 1}
    rerun = inst.events.get(type="instance_rerun")
    assert rerun.node_id == "b" and rerun.payload["checkpoint_seq"] > 0

    inst = run_queued(inst)
    assert inst.status == "completed"
    assert runs(inst, "b")[1].output["saw"] == ["a", "topic"]
    assert [s.visit for s in runs(inst, "a")] == [1]
    assert [s.visit for s in runs(inst, "c")] == [1, 2]
    assert [s.visit for s in runs(inst, "end")] == [1, 2]
    assert AuditEntry.objects.filter(instance=inst, action="rerun_from").count() == 1


@pytest.mark.django_db
def test_rerun_of_one_branch_counts_the_other_branch_as_already_joined() -> None:
    inst = run_queued(start(fan_graph()))
    assert inst.status == "completed"

    operations.rerun_from_node(inst.pk, "p")
    inst.refresh_from_db()
    edges = inst.version.graph["edges"]
    q_to_j = next(i for i, e in enumerate(edges) if (e["source"], e["target"]) == ("q", "j"))
    assert inst.state["joins"] == {"j": {"edges": {str(q_to_j): True}, "started": False}}

    inst = run_queued(inst)
    assert inst.status == "completed", inst.error
    assert [s.visit for s in runs(inst, "p")] == [1, 2]
    assert [s.visit for s in runs(inst, "q")] == [1]  # not rerun
    assert [s.visit for s in runs(inst, "j")] == [1, 2]


@pytest.mark.django_db
def test_rerun_from_the_failed_node_of_a_failed_instance() -> None:
    FAILING.add("b")
    inst = run_queued(start(chain_graph()))
    assert inst.status == "failed"
    FAILING.clear()
    operations.rerun_from_node(inst.pk, "b")
    inst = run_queued(inst)
    assert inst.status == "completed"
    assert [(s.visit, s.status) for s in runs(inst, "b")] == [(1, "failed"), (2, "succeeded")]


@pytest.mark.django_db
def test_rerun_refuses_with_a_reason() -> None:
    running = start(chain_graph())
    with pytest.raises(operations.OperationError, match="is running: only a failed, cancelled or completed "
                                                        "instance can be rerun; cancel it first"):
        operations.rerun_from_node(running.pk, "a")
    done = run_queued(start(chain_graph()))
    with pytest.raises(operations.OperationError, match="node 'nope' is not in") as missing:
        operations.rerun_from_node(done.pk, "nope")
    assert missing.value.status == 404
    with pytest.raises(operations.OperationError, match="is a start node"):
        operations.rerun_from_node(done.pk, "start")

    FAILING.add("b")
    stopped = run_queued(start(chain_graph()))
    with pytest.raises(operations.OperationError, match="node 'c' never ran"):
        operations.rerun_from_node(stopped.pk, "c")


def loop_join_graph(*, two_exits: bool, exit_first: bool) -> dict[str, Any]:
    """start -> c (a branch) and start -> x <-> y (a loop, going round once) -> j (join all) -> end.

    The loop's exits into j (y -> j, and x -> j when `two_exits`) are one join input ("loop:x"), so
    j waits for two inputs whatever the number of edges; `exit_first` lists the loop's exit before
    c -> j (the order of j's inputs)."""
    loop = [("x", "y", None), ("y", "x", "context.y < 2"), ("y", "j", "context.y >= 2")]
    if two_exits:
        loop.append(("x", "j", "context.x > 5"))  # never fires: x always goes on to y
    branch = [("start", "c", None), ("c", "j", None)]
    edges = [("start", "x", None), *(loop + branch if exit_first else branch + loop), ("j", "end", None)]
    g = graph([node("c"), node("x"), node("y"), node("j")], [])
    g["edges"] = [{"source": a, "target": b, **({"when": w} if w else {})} for a, b, w in edges]
    return g


@pytest.mark.django_db
@pytest.mark.parametrize(("two_exits", "exit_first"), [(True, False), (True, True), (False, True)])
def test_rerun_of_a_branch_joined_with_a_loop_exit_runs_the_join_again(two_exits: bool, exit_first: bool) -> None:
    inst = run_queued(start(loop_join_graph(two_exits=two_exits, exit_first=exit_first)))
    assert inst.status == "completed", inst.error
    assert [s.visit for s in runs(inst, "y")] == [1, 2]

    operations.rerun_from_node(inst.pk, "c")
    inst.refresh_from_db()
    # The loop is off the rerun path: its exit counts as it resolved (fired), under the join's slot.
    assert inst.state["joins"] == {"j": {"edges": {"loop:x": True}, "started": False}}

    inst = run_queued(inst)
    assert inst.status == "completed", inst.error
    assert [s.visit for s in runs(inst, "c")] == [1, 2]
    assert [s.visit for s in runs(inst, "x")] == [1, 2]  # not rerun
    assert [(s.visit, s.status) for s in runs(inst, "j")] == [(1, "succeeded"), (2, "succeeded")]
    assert [s.visit for s in runs(inst, "end")] == [1, 2]


@pytest.mark.django_db
def test_rerun_from_inside_a_loop_joined_with_a_branch_off_the_path() -> None:
    g = loop_join_graph(two_exits=True, exit_first=True)
    inst = run_queued(start(g))
    assert inst.status == "completed", inst.error

    operations.rerun_from_node(inst.pk, "x")
    inst.refresh_from_db()
    c_to_j = next(i for i, e in enumerate(g["edges"]) if (e["source"], e["target"]) == ("c", "j"))
    assert inst.state["joins"] == {"j": {"edges": {str(c_to_j): True}, "started": False}}

    inst = run_queued(inst)
    assert inst.status == "completed", inst.error
    assert [s.visit for s in runs(inst, "c")] == [1]  # off the path: not rerun
    assert [s.visit for s in runs(inst, "y")] == [1, 2, 3]  # from x's second visit: once more
    assert [s.visit for s in runs(inst, "j")] == [1, 2]


# --- Cancel -------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_cancel_stops_the_instance_and_is_audited(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("op")
    inst = start(chain_graph())
    operations.cancel(inst.pk, user, note="wrong input")
    inst.refresh_from_db()
    assert inst.status == "cancelled"
    assert inst.error["message"] == "cancelled by op: wrong input"
    assert [s.status for s in runs(inst, "a")] == ["cancelled"]
    entry = AuditEntry.objects.get(instance=inst)
    assert (entry.action, entry.actor, entry.before["status"], entry.after["status"]) == \
        ("cancel", user, "running", "cancelled")
    with pytest.raises(operations.OperationError, match="is cancelled: only a running"):
        operations.cancel(inst.pk, user)

    # A cancelled instance can be run again from a node: the cut-short step runs again too.
    operations.rerun_from_node(inst.pk, "a")
    inst = run_queued(inst)
    assert inst.status == "completed"


# --- Concurrency (PostgreSQL: SQLite ignores row locks) -----------------------------------------

@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_operators_retrying_at_once_apply_one_retry() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL")
    FAILING.add("b")
    inst = run_queued(start(chain_graph()))
    assert inst.status == "failed"
    FAILING.clear()
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def retry() -> None:
        from django.db import connections

        try:
            barrier.wait()
            operations.retry_failed_step(inst.pk)
            outcomes.append("retried")
        except operations.OperationError as exc:
            outcomes.append(exc.message)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=retry) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == sorted(["retried", f"instance {inst.pk} is running: only a failed instance's "
                                                  "failed step can be retried"])
    assert inst.events.filter(type="instance_retried").count() == 1
    inst = run_queued(inst)
    assert inst.status == "completed"
