"""scheduling.advance: activations, joins, dead-path elimination, loops; count_activations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import build
from workflows.engine.graph import Graph
from workflows.engine.scheduling import Decision, JoinState, advance, count_activations, edges_fired

EXAMPLES = Path(__file__).resolve().parents[2] / "workflows" / "examples" / "graphs"


class Run:
    """Drives advance() the way the runtime does: one finished node at a time, joins persisted."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.joins: JoinState = {}

    def finish(self, node_id: str, route: str | None = None, **truths: bool) -> Decision:
        # A `when` holds if it tests the given route or names a true flag.
        def holds(edge: Any) -> bool:
            when = edge.when or ""
            if when.startswith("route =="):
                return when == f"route == '{route}'"
            return bool(truths.get(when))

        fired = edges_fired(self.graph, node_id, holds)
        # Round-trip the join state through JSON, as the runtime stores it in the database.
        decision = advance(self.graph, self.joins, node_id, fired)
        self.joins = json.loads(json.dumps(self.joins))
        return decision


def test_chain_activates_the_next_node() -> None:
    run = Run(build(["start:start", "a", "b", "done:end"], [("start", "a"), ("a", "b"), ("b", "done")]))
    assert run.finish("start").activate == ["a"]
    decision = run.finish("a")
    assert (decision.activate, decision.skipped, decision.fired_edges) == (["b"], [], [1])
    assert run.finish("b").activate == ["done"]
    assert run.joins == {}


def test_fan_out_activates_every_branch() -> None:
    run = Run(build(["start:start", "a", "b", "c", "done:end"],
                    [("start", "a"), ("a", "b"), ("a", "c"), ("b", "done", "x"), ("c", "done", "y")]))
    assert run.finish("a").activate == ["b", "c"]


def test_conditional_fan_out_skips_the_branch_not_taken_down_to_the_end() -> None:
    run = Run(build(["start:start", "a", "yes", "no", "after_no", "done:end", "other:end"],
                    [("start", "a"), ("a", "yes", "ok"), ("a", "no", "nope"), ("no", "after_no"),
                     ("after_no", "other"), ("yes", "done")]))
    decision = run.finish("a", ok=True)
    assert decision.activate == ["yes"]
    assert decision.skipped == ["no", "after_no", "other"]
    assert decision.fired_edges == [1]


def test_no_edge_fires_activates_nothing() -> None:
    run = Run(build(["start:start", "a", "b", "done:end"], [("start", "a"), ("a", "b", "ok"), ("b", "done")]))
    decision = run.finish("a", ok=False)
    assert decision.activate == [] and decision.fired_edges == []
    assert decision.skipped == ["b", "done"]


# --- Joins -----------------------------------------------------------------------------------------

DIAMOND = [("start", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "done")]


def test_join_all_waits_for_every_branch_and_activates_once() -> None:
    run = Run(build(["start:start", "a", "b", "c", "d", "done:end"], DIAMOND))
    run.finish("a")
    first = run.finish("b")
    assert first.activate == [] and first.skipped == []
    assert run.joins == {"d": {"edges": {"3": True}, "started": False}}
    second = run.finish("c")
    assert second.activate == ["d"]
    assert run.joins == {}


def test_join_all_order_of_branches_does_not_matter() -> None:
    run = Run(build(["start:start", "a", "b", "c", "d", "done:end"], DIAMOND))
    run.finish("a")
    assert run.finish("c").activate == []
    assert run.finish("b").activate == ["d"]


def test_join_all_with_a_dead_branch_starts_when_the_live_one_finishes() -> None:
    # a -> b is not taken: b is skipped, its edge into d resolves as not fired; c's edge fires.
    run = Run(build(["start:start", "a", "b", "c", "d", "done:end"],
                    [("start", "a"), ("a", "b", "left"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "done")]))
    decision = run.finish("a", left=False)
    assert decision.activate == ["c"] and decision.skipped == ["b"]
    assert run.joins == {"d": {"edges": {"3": False}, "started": False}}
    assert run.finish("c").activate == ["d"]


def test_dead_path_elimination_through_a_chain_of_skipped_nodes() -> None:
    run = Run(build(["start:start", "split", "l1", "l2", "l3", "r", "join", "done:end"],
                    [("start", "split"), ("split", "l1", "left"), ("split", "r", "right"), ("l1", "l2"),
                     ("l2", "l3"), ("l3", "join"), ("r", "join"), ("join", "done")]))
    decision = run.finish("split", right=True)
    assert decision.activate == ["r"]
    assert decision.skipped == ["l1", "l2", "l3"]
    assert run.finish("r").activate == ["join"]


def test_join_with_every_branch_dead_is_skipped_and_so_is_what_follows() -> None:
    run = Run(build(["start:start", "split", "l", "r", "join", "after", "done:end", "alt:end"],
                    [("start", "split"), ("split", "l", "left"), ("split", "r", "right"), ("l", "join"),
                     ("r", "join"), ("join", "after"), ("after", "done"), ("split", "alt", "neither")]))
    decision = run.finish("split", neither=True)
    assert decision.activate == ["alt"]
    assert decision.skipped == ["l", "r", "join", "after", "done"]
    assert run.joins == {}


def test_join_any_starts_on_the_first_fired_branch_and_absorbs_the_rest() -> None:
    nodes = ["start:start", "a", "b", "c", {"id": "d", "type": "python", "config": {"function": "noop"},
                                             "join": "any"}, "done:end"]
    run = Run(build(nodes, DIAMOND))
    run.finish("a")
    assert run.finish("c").activate == ["d"]
    assert run.joins == {"d": {"edges": {"4": True}, "started": True}}
    late = run.finish("b")
    assert late.activate == [] and late.skipped == []
    assert run.joins == {}


def test_join_any_waits_past_a_dead_branch() -> None:
    nodes = ["start:start", "a", "b", "c", {"id": "d", "type": "python", "config": {"function": "noop"},
                                             "join": "any"}, "done:end"]
    run = Run(build(nodes, [("start", "a"), ("a", "b", "left"), ("a", "c"), ("b", "d"), ("c", "d"),
                            ("d", "done")]))
    first = run.finish("a", left=False)
    assert first.activate == ["c"] and first.skipped == ["b"]
    assert run.finish("c").activate == ["d"]
    assert run.joins == {}


def test_join_any_with_every_branch_dead_is_skipped() -> None:
    nodes = ["start:start", "a", "b", "c", {"id": "d", "type": "python", "config": {"function": "noop"},
                                             "join": "any"}, "done:end", "other:end"]
    run = Run(build(nodes, [("start", "a"), ("a", "b", "x"), ("a", "c", "y"), ("b", "d"), ("c", "d"),
                            ("d", "done"), ("a", "other", "z")]))
    decision = run.finish("a", z=True)
    assert decision.skipped == ["b", "c", "d", "done"]
    assert decision.activate == ["other"]


def test_three_way_join_records_each_edge_as_it_resolves() -> None:
    run = Run(build(["start:start", "s", "b1", "b2", "b3", "j", "done:end"],
                    [("start", "s"), ("s", "b1"), ("s", "b2"), ("s", "b3"), ("b1", "j"), ("b2", "j"), ("b3", "j"),
                     ("j", "done")]))
    assert run.finish("s").activate == ["b1", "b2", "b3"]
    run.finish("b1")
    run.finish("b3")
    assert run.joins == {"j": {"edges": {"4": True, "6": True}, "started": False}}
    assert run.finish("b2").activate == ["j"]


# --- Loops -----------------------------------------------------------------------------------------

def test_back_edge_reactivates_its_target() -> None:
    graph = build(["start:start", "think", "tool", "done:end"],
                  [("start", "think"), ("think", "tool", "route == 'tool'"), ("tool", "think"),
                   ("think", "done", "route == 'done'")])
    run = Run(graph)
    assert run.finish("start").activate == ["think"]
    for _ in range(3):
        assert run.finish("think", "tool").activate == ["tool"]
        decision = run.finish("tool")
        assert decision.activate == ["think"] and decision.skipped == []
    final = run.finish("think", "done")
    assert final.activate == ["done"] and final.skipped == []
    assert run.joins == {}


def test_two_back_edges_to_one_node_activate_it_once() -> None:
    run = Run(build(["start:start", "h", "x", "done:end"],
                    [("start", "h"), ("h", "x"), ("x", "h", "again"), ("x", "h", "more"), ("x", "done", "stop")]))
    decision = run.finish("x", again=True, more=True)
    assert decision.activate == ["h"]
    assert decision.fired_edges == [2, 3]


def test_an_end_reached_from_two_nodes_of_a_loop_starts_after_several_rounds() -> None:
    # The seed loop: a and b bounce between each other; each may also end. The end node has one
    # incoming edge from each of them: it must start whichever ends the loop, in whichever round.
    data = json.loads((EXAMPLES / "seed_loop.json").read_text())
    run = Run(Graph.from_json(data))
    run.finish("start")
    assert run.finish("node_a", "node_b").activate == ["node_b"]
    assert run.finish("node_b", "node_a").activate == ["node_a"]
    assert run.finish("node_a", "node_b").activate == ["node_b"]
    assert run.finish("node_b", "node_a").activate == ["node_a"]
    decision = run.finish("node_a", "done")
    assert decision.activate == ["done"]
    assert decision.skipped == []
    assert run.joins == {}


def test_seed_loop_ending_from_the_second_node() -> None:
    run = Run(Graph.from_json(json.loads((EXAMPLES / "seed_loop.json").read_text())))
    run.finish("start")
    run.finish("node_a", "node_b")
    assert run.finish("node_b", "done").activate == ["done"]


def test_a_loop_never_entered_skips_the_join_after_it() -> None:
    # The loop a <-> b is behind a condition that does not hold: its body is skipped, its exits into
    # `after` resolve as not fired, so the join at `after` starts on the other branch alone.
    run = Run(build(["start:start", "s", "a", "b", "c", "after", "done:end"],
                    [("start", "s"), ("s", "a", "loop"), ("s", "c"), ("a", "b", "route == 'b'"),
                     ("b", "a", "route == 'a'"), ("a", "after", "route == 'out'"), ("b", "after", "route == 'out'"),
                     ("c", "after"), ("after", "done")]))
    decision = run.finish("s", loop=False)
    assert decision.activate == ["c"] and decision.skipped == ["a", "b"]
    assert run.finish("c").activate == ["after"]


def test_a_join_after_a_loop_waits_for_the_loop_to_end() -> None:
    run = Run(build(["start:start", "s", "a", "b", "c", "after", "done:end"],
                    [("start", "s"), ("s", "a"), ("s", "c"), ("a", "b", "route == 'b'"),
                     ("b", "a", "route == 'a'"), ("a", "after", "route == 'out'"), ("b", "after", "route == 'out'"),
                     ("c", "after"), ("after", "done")]))
    run.finish("s")
    assert run.finish("c").activate == []
    assert run.finish("a", "b").activate == ["b"]
    assert run.finish("b", "a").activate == ["a"]
    assert run.finish("a", "b").activate == ["b"]
    assert run.finish("b", "out").activate == ["after"]
    assert run.joins == {}


def test_a_join_inside_a_loop_body_waits_for_both_branches() -> None:
    run = Run(build(["start:start", "h", "b", "c", "m", "done:end"],
                    [("start", "h"), ("h", "b"), ("h", "c"), ("b", "m"), ("c", "m"), ("m", "h", "route == 'again'"),
                     ("m", "done", "route == 'stop'")]))
    run.finish("start")
    assert run.finish("h").activate == ["b", "c"]
    assert run.finish("b").activate == []
    assert run.finish("c").activate == ["m"]


def test_react_agent_example_skips_only_the_branch_not_taken() -> None:
    run = Run(Graph.from_json(json.loads((EXAMPLES / "react_agent.json").read_text())))
    skipped: list[str] = []
    activated: list[str] = []
    for node, route in [("start", None), ("intent", "think"), ("think", "lookup"), ("lookup", None),
                        ("think", "answer"), ("answer", None), ("filter", None)]:
        decision = run.finish(node, route)
        skipped += decision.skipped
        activated += decision.activate
    assert activated == ["intent", "think", "lookup", "think", "answer", "filter", "done"]
    assert skipped == ["smalltalk"]
    assert run.joins == {}


def test_react_agent_small_talk_path() -> None:
    run = Run(Graph.from_json(json.loads((EXAMPLES / "react_agent.json").read_text())))
    run.finish("start")
    decision = run.finish("intent", "smalltalk")
    assert decision.activate == ["smalltalk"]
    assert decision.skipped == ["think", "lookup", "answer"]  # the loop never entered: its body too
    assert run.finish("smalltalk").activate == ["filter"]
    assert run.finish("filter").activate == ["done"]


def test_research_report_fans_out_and_joins() -> None:
    run = Run(Graph.from_json(json.loads((EXAMPLES / "research_report.json").read_text())))
    run.finish("start")
    assert run.finish("plan").activate == ["market", "news", "competitors"]
    assert run.finish("news").activate == []
    assert run.finish("competitors").activate == []
    assert run.finish("market").activate == ["clean"]


def test_refund_saga_rejection_skips_the_payment_branch() -> None:
    run = Run(Graph.from_json(json.loads((EXAMPLES / "refund_saga.json").read_text())))
    run.finish("start")
    assert run.finish("assess", "reserve").activate == ["reserve"]
    assert run.finish("reserve").activate == ["approve"]
    decision = advance(run.graph, run.joins, "approve",
                       edges_fired(run.graph, "approve", lambda e: e.when == "not approved"))
    assert decision.activate == ["reject"]
    assert decision.skipped == ["pay", "notify", "done"]


# --- Graph helpers the scheduler relies on ---------------------------------------------------------

def test_loops_and_join_slots() -> None:
    graph = Graph.from_json(json.loads((EXAMPLES / "seed_loop.json").read_text()))
    assert graph.cycle_of("node_a") == {"node_a", "node_b"}
    assert graph.cycle_of("start") == frozenset()
    assert graph.join_slots("done") == ["loop:node_a"]
    assert graph.join_slots("node_a") == ["0"]
    # Only the edge that returns to where the loop is entered closes it; node_a -> node_b is forward.
    back = [e.label for e in graph.edges if graph.is_back_edge(e)]
    assert back == ["node_b -> node_a"]
    assert graph.join_slots("node_b") == ["1"]


# --- The loop breaker's count ----------------------------------------------------------------------

@pytest.mark.parametrize(("loop_count", "activations", "max_transitions", "allowed", "count"), [
    (0, 1, 1, True, 1),
    (9, 1, 10, True, 10),  # exactly the maximum is allowed
    (10, 1, 10, False, 11),  # one past it is refused
    (8, 2, 10, True, 10),
    (8, 3, 10, False, 11),
    (5, 0, 5, True, 5),
])
def test_count_activations_boundary(loop_count: int, activations: int, max_transitions: int, allowed: bool,
                                    count: int) -> None:
    check = count_activations(loop_count, activations, max_transitions)
    assert (check.allowed, check.loop_count) == (allowed, count)


def test_edges_fired_evaluates_only_conditional_edges() -> None:
    graph = build(["start:start", "a", "b", "c", "done:end"],
                  [("start", "a"), ("a", "b"), ("a", "c", "x"), ("b", "done"), ("c", "done")])
    asked: list[str] = []

    def holds(edge: Any) -> bool:
        asked.append(edge.when)
        return False

    assert edges_fired(graph, "a", holds) == {1: True, 2: False}
    assert asked == ["x"]
