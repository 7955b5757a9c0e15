"""scheduling.joins_for_reroute: after a reroute, the joins reachable from the chosen node count the
inputs of the abandoned branches as not fired (dead-path elimination) and wait for the rest."""

from __future__ import annotations

from tests.engine.conftest import build
from tests.engine.test_rerun_joins import index, loop_and_branch
from tests.engine.test_scheduling import Run
from workflows.engine.graph import Graph
from workflows.engine.scheduling import joins_for_reroute

FORK = [("start", "a"), ("start", "b"), ("a", "a2"), ("a2", "j", "ok"), ("b", "j"), ("j", "done")]


def fork() -> Graph:
    return build(["start:start", "a", "a2", "b", "j", "done:end"], FORK)


def test_the_abandoned_branch_resolves_not_fired_and_the_rerouted_one_stays_open() -> None:
    graph = fork()
    b_j = str(index(graph, "b", "j"))
    joins, abandoned = joins_for_reroute(graph, "a", {}, set())
    assert joins == {"j": {"edges": {b_j: False}, "started": False}}
    assert abandoned == {"j": ["b"]}
    run = Run(graph)
    run.joins = joins
    assert run.finish("a").activate == ["a2"]
    assert run.finish("a2", ok=True).activate == ["j"]
    assert run.joins == {}


def test_every_input_not_fired_skips_the_join() -> None:
    graph = fork()
    run = Run(graph)
    run.joins, _ = joins_for_reroute(graph, "a2", {}, set())
    decision = run.finish("a2", ok=False)
    assert (decision.activate, decision.skipped) == ([], ["j", "done"])


def test_an_input_resolved_before_the_reroute_keeps_its_value() -> None:
    graph = fork()
    a2_j, b_j = str(index(graph, "a2", "j")), str(index(graph, "b", "j"))
    joins, abandoned = joins_for_reroute(graph, "b", {"j": {"edges": {a2_j: True, b_j: False}, "started": False}},
                                         set())
    assert joins == {"j": {"edges": {a2_j: True}, "started": False}}  # b's input reopens: b runs again
    assert abandoned == {}


def test_an_input_a_step_left_open_may_still_resolve_stays_open() -> None:
    graph = fork()
    # a is still running (or waits for a person): a2 after it may still feed j.
    joins, abandoned = joins_for_reroute(graph, "b", {}, {"a"})
    assert (joins, abandoned) == ({}, {})


def test_the_chosen_join_itself_starts_directly_without_a_record() -> None:
    graph = fork()
    joins, abandoned = joins_for_reroute(graph, "j", {"j": {"edges": {"4": False}, "started": False}}, set())
    assert (joins, abandoned) == ({}, {})


def test_records_of_joins_not_reachable_from_the_chosen_node_stay() -> None:
    graph = fork()
    other = {"j": {"edges": {"4": True}, "started": False}}
    joins, _ = joins_for_reroute(graph, "done", other, set())
    assert joins == other


def test_rerouted_into_a_loop_its_exit_stays_open_and_the_branch_off_it_is_dropped() -> None:
    graph = loop_and_branch()
    c_j = str(index(graph, "c", "j"))
    joins, abandoned = joins_for_reroute(graph, "z", {}, set())
    assert joins == {"j": {"edges": {c_j: False}, "started": False}}
    assert abandoned == {"j": ["c"]}
    run = Run(graph)
    run.joins = joins
    run.finish("z")
    assert run.finish("y", again=True).activate == ["x"]  # goes round: the exit stays open
    assert run.joins == {"j": {"edges": {c_j: False}, "started": False}}
    run.finish("x")
    run.finish("z")
    assert run.finish("y", stop=True).activate == ["j"]
