"""scheduling.joins_for_rerun: the join records an operator's rerun from a node starts with are keyed
and shaped as advance() keys them (a loop's exits are one input), so the scheduler completes them."""

from __future__ import annotations

from tests.engine.conftest import build
from tests.engine.test_scheduling import Run
from workflows.engine.graph import Graph
from workflows.engine.scheduling import joins_for_rerun, rerun_deciders

# A branch c and a loop x -> z -> y -> x, both into the join j; the loop leaves from y (or, never, x)
# for j, or from y for k.
LOOP_AND_BRANCH = [("start", "c"), ("start", "x"), ("x", "z"), ("z", "y"), ("y", "x", "again"),
                   ("y", "j", "stop"), ("x", "j", "never"), ("y", "k", "elsewhere"), ("c", "j"), ("j", "done"),
                   ("k", "done")]


def loop_and_branch() -> Graph:
    return build(["start:start", "c", "x", "z", "y", "j", "k", "done:end"], LOOP_AND_BRANCH)


def index(graph: Graph, source: str, target: str) -> int:
    return next(e.index for e in graph.edges if (e.source, e.target) == (source, target))


def test_a_plain_two_branch_join_counts_the_branch_off_the_path() -> None:
    graph = build(["start:start", "p", "q", "j", "done:end"],
                  [("start", "p"), ("start", "q"), ("p", "j"), ("q", "j"), ("j", "done")])
    path = {"p", "j", "done"}
    assert rerun_deciders(graph, path) == {"q"}
    joins = joins_for_rerun(graph, path, {"j": {"edges": {"2": True, "3": True}, "started": False}},
                            {"q": {3}})
    assert joins == {"j": {"edges": {"3": True}, "started": False}}
    run = Run(graph)
    run.joins = joins
    assert run.finish("p").activate == ["j"]
    assert run.joins == {}


def test_a_loop_exit_off_the_path_is_one_input_resolved_by_the_node_that_stopped_looping() -> None:
    graph = loop_and_branch()
    assert graph.join_slots("j") == ["loop:x", str(index(graph, "c", "j"))]
    path = {"c", "j", "done"}
    assert rerun_deciders(graph, path) == {"x", "y", "z", "k"}  # k: for the end's join
    last = {"x": {index(graph, "x", "z")}, "z": {index(graph, "z", "y")}, "y": {index(graph, "y", "j")}}
    joins = joins_for_rerun(graph, path, {}, last)
    assert joins == {"j": {"edges": {"loop:x": True}, "started": False}}
    run = Run(graph)
    run.joins = joins
    assert run.finish("c").activate == ["j"]
    assert run.joins == {}


def test_a_loop_that_left_for_elsewhere_resolves_its_exit_as_not_fired() -> None:
    graph = loop_and_branch()
    last = {"x": {index(graph, "x", "z")}, "z": {index(graph, "z", "y")}, "y": {index(graph, "y", "k")}}
    joins = joins_for_rerun(graph, {"c", "j", "done"}, {}, last)
    assert joins == {"j": {"edges": {"loop:x": False}, "started": False}}
    run = Run(graph)
    run.joins = joins
    assert run.finish("c").activate == ["j"]


def test_a_loop_cut_short_leaves_its_exit_open_for_the_loop_to_resolve() -> None:
    graph = loop_and_branch()
    # x and y went round; z was cut short by the stop (it runs again with the rerun).
    last = {"x": {index(graph, "x", "z")}, "z": None, "y": {index(graph, "y", "x")}}
    assert joins_for_rerun(graph, {"c", "j", "done"}, {}, last) == {}
    run = Run(graph)
    assert run.finish("c").activate == []
    run.finish("z")
    assert run.finish("y", stop=True).activate == ["j"]


def test_a_rerun_inside_the_loop_counts_the_branch_and_keeps_the_records_off_the_path() -> None:
    graph = loop_and_branch()
    path = graph.reachable_from("z") | {"z"}
    assert rerun_deciders(graph, path) == {"c"}
    c_to_j = str(index(graph, "c", "j"))
    other = {"edges": {"9": True}, "started": False}
    joins = joins_for_rerun(graph, path - {"done"}, {"j": {"edges": {"loop:x": True}, "started": False},
                                                     "done": other}, {"c": {index(graph, "c", "j")}})
    assert joins == {"done": other, "j": {"edges": {c_to_j: True}, "started": False}}
    run = Run(graph)
    run.joins = {"j": joins["j"]}
    run.finish("z")
    assert run.finish("y", stop=True).activate == ["j"]
