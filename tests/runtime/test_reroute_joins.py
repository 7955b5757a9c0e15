"""A reroute and the joins after it: the work it abandons counts as having taken no edge.

A reroute (an operator's review decision) cancels the open work and starts the chosen node. A join
downstream of that node whose other inputs came from the cancelled (or never started) branches must
not wait for them: they resolve as not fired (dead-path elimination), the inputs the rerouted path
can still reach stay open. In-process: jobs are captured and run one at a time here."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.workflows.support import edge, py
from workflows import runtime
from workflows.models import ReviewItem, StepRun, WorkflowInstance
from workflows.operators.review import Decision, decide


def reroute(instance: WorkflowInstance, goto: str) -> None:
    boss = User.objects.create_superuser("boss", "b@example.com", "x-very-long-password")
    decide(ReviewItem.objects.get(instance=instance, status="open").pk, boss,
           Decision(action="reroute", goto=goto, extra_transitions=20))


def drain(jobs: list[tuple[int, str]]) -> None:
    while jobs:
        runtime.run_step(jobs.pop(0)[0], "w")


def ran(instance: WorkflowInstance, node: str) -> list[str]:
    return list(StepRun.objects.filter(instance_id=instance.pk, node_id=node).order_by("visit")
                .values_list("status", flat=True))


def fork(when_a: str | None = None) -> dict[str, Any]:
    """start -> a0 -> a -> a2 -> j and start -> b -> j (join all), j -> end. With one step at a time, b
    is held back while a0 and a run; a2's activation (the 5th) trips the loop breaker: the instance
    halts with b held. (4 is the least max_transitions validation takes: start -> b -> j -> end.)"""
    return {
        "nodes": [{"id": "start", "type": "start"}, py("a0", "tests.echo"), py("a", "tests.echo"),
                  py("a2", "tests.echo", args={"ok": False}), py("b", "tests.echo"), py("j", "tests.echo"),
                  {"id": "end", "type": "end"}],
        "edges": [edge("start", "a0"), edge("start", "b"), edge("a0", "a"), edge("a", "a2"),
                  edge("a2", "j", when_a), edge("b", "j"), edge("j", "end")],
        "settings": {"max_concurrency": 1, "max_transitions": 4}}


def halted_with_b_held(make_version: Any, jobs: list[tuple[int, str]], graph: dict[str, Any]) -> WorkflowInstance:
    instance = runtime.start_instance(make_version(graph), {})
    (first,) = jobs
    assert StepRun.objects.get(pk=first[0]).node_id == "a0"  # the longer branch first; b held back
    while jobs and instance.status != "halted":
        runtime.run_step(jobs.pop(0)[0], "w")
        instance.refresh_from_db()
    assert ran(instance, "a") == ["succeeded"]
    assert instance.status == "halted" and instance.halt_reason == "loop_breaker"
    assert [node for node, _ in instance.state["throttled"]] == ["b"]
    return instance


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
@pytest.mark.parametrize("goto", ["a", "a2"])
def test_a_reroute_resolves_the_abandoned_inputs_of_a_join_as_not_fired(make_version, jobs, settings, store, goto):
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    instance = halted_with_b_held(make_version, jobs, fork())
    reroute(instance, goto)
    instance.refresh_from_db()
    assert ran(instance, "b") == ["cancelled"]
    resumed = instance.events.get(type="instance_resumed")
    assert resumed.payload["abandoned_inputs"] == {"j": ["b"]}

    drain(jobs)
    instance.refresh_from_db()
    assert instance.status == "completed", (instance.status, instance.halt_reason, instance.error)
    assert ran(instance, "j") == ["succeeded"]
    assert ran(instance, "b") == ["cancelled"]
    assert instance.state.get("ended") == "end"
    assert instance.open_steps == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_a_reroute_into_the_held_branch_keeps_what_the_other_branch_resolved(make_version, jobs, settings, store):
    """Rerouted to b (the held branch): a2, whose activation the reroute dropped, never runs, so its
    input to j counts as not fired; b's input is open until b finishes, then j runs."""
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    instance = halted_with_b_held(make_version, jobs, fork())
    reroute(instance, "b")
    drain(jobs)
    instance.refresh_from_db()
    assert instance.status == "completed", (instance.status, instance.halt_reason, instance.error)
    assert ran(instance, "a2") == []
    assert ran(instance, "b") == ["cancelled", "succeeded"]
    assert ran(instance, "j") == ["succeeded"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
def test_a_join_whose_every_input_ends_not_fired_after_a_reroute_is_skipped(make_version, jobs, settings, store):
    """The abandoned input is not fired and the rerouted path does not fire its own either: j is
    skipped (as the scheduler skips a join none of whose inputs fired), never run."""
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    instance = halted_with_b_held(make_version, jobs, fork(when_a="ok"))
    reroute(instance, "a2")
    drain(jobs)
    instance.refresh_from_db()
    assert ran(instance, "j") == []
    assert instance.events.filter(type="node_skipped", node_id="j").exists()
    assert (instance.status, instance.halt_reason) == ("failed", "dead_end")  # no path leads on to the end
    assert instance.open_steps == 0


def looping() -> dict[str, Any]:
    """start -> think <-> tool (a loop), its exit think -> fin and start -> side -> fin (join all)."""
    return {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "think", "type": "router", "config": {"rules": [{"when": "context.n < 2", "route": "tool"}],
                                                         "default": "answer"}},
            py("tool", "tests.echo", args={"set": {"n": "{{ context.n + 1 }}"}}),
            py("side", "tests.echo"), py("fin", "tests.echo"), {"id": "end", "type": "end"}],
        "edges": [edge("start", "think"), edge("start", "side"), edge("think", "tool", "route == 'tool'"),
                  edge("tool", "think"), edge("think", "fin", "route == 'answer'"), edge("side", "fin"),
                  edge("fin", "end")],
        "settings": {"max_concurrency": 1, "max_transitions": 4}}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("store", ["orm", "sql"])
@pytest.mark.parametrize("goto", ["tool", "think"])
def test_a_reroute_into_a_loop_keeps_the_loop_exit_open_and_drops_the_abandoned_branch(
        make_version, jobs, settings, store, goto):
    """The rerouted node is on a loop whose exit feeds the join: the exit stays open while the loop
    goes round (only the round that leaves resolves it), the abandoned branch counts as not fired."""
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STORE": store}
    instance = runtime.start_instance(make_version(looping()), {"n": 0})
    while jobs and instance.status != "halted":
        runtime.run_step(jobs.pop(0)[0], "w")
        instance.refresh_from_db()
    assert instance.status == "halted" and instance.halt_reason == "loop_breaker"
    assert ran(instance, "side") == ["pending"]
    reroute(instance, goto)
    drain(jobs)
    instance.refresh_from_db()
    assert instance.status == "completed", (instance.status, instance.halt_reason, instance.error)
    assert ran(instance, "side") == ["cancelled"]
    assert ran(instance, "fin") == ["succeeded"]
    assert len(ran(instance, "tool")) == 2  # the loop went round until n reached 2, then left it
