"""Joins inside loop bodies: a join waits for the branches of its own round, fires once per round
(with dead-path elimination inside the round), and the next round starts with a fresh record."""

from __future__ import annotations

from typing import Any

from tests.engine.conftest import build
from tests.engine.test_scheduling import Run

ANY_JOIN = {"id": "m", "type": "python", "config": {"function": "noop"}, "join": "any"}

# An agent round: h fans out to two tools b and c, m joins them, then goes round or stops.
FAN_LOOP = [("start", "h"), ("h", "b"), ("h", "c"), ("b", "m"), ("c", "m"),
            ("m", "h", "route == 'again'"), ("m", "done", "route == 'stop'")]


def fan_loop(m: Any = "m") -> Run:
    return Run(build(["start:start", "h", "b", "c", m, "done:end"], FAN_LOOP))


def test_the_body_of_a_loop_is_forward_only_the_edge_back_to_its_entry_closes_it() -> None:
    graph = build(["start:start", "h", "b", "c", "m", "done:end"], FAN_LOOP)
    assert [e.label for e in graph.edges if graph.is_back_edge(e)] == ["m -> h"]
    assert graph.join_slots("m") == ["3", "4"]
    assert graph.join_slots("h") == ["0"]  # the back edge starts h on its own
    assert graph.join_slots("done") == ["loop:b"]


def test_two_rounds_of_a_fan_out_and_join_fire_the_join_once_per_round() -> None:
    run = fan_loop()
    assert run.finish("start").activate == ["h"]
    for _ in range(2):
        assert run.finish("h").activate == ["b", "c"]
        first = run.finish("c")
        assert (first.activate, first.skipped) == ([], [])
        assert run.joins == {"m": {"edges": {"4": True}, "started": False}}
        assert run.finish("b").activate == ["m"]
        assert run.joins == {}  # the next round starts fresh
        assert run.finish("m", "again").activate == ["h"]
    run.finish("h")
    run.finish("b")
    run.finish("c")
    final = run.finish("m", "stop")
    assert (final.activate, final.skipped) == (["done"], [])
    assert run.joins == {}


def test_a_branch_dead_in_one_round_and_taken_in_the_next() -> None:
    run = Run(build(["start:start", "h", "b", "c", "m", "done:end"],
                    [("start", "h"), ("h", "b", "tool_b"), ("h", "c"), ("b", "m"), ("c", "m"),
                     ("m", "h", "route == 'again'"), ("m", "done", "route == 'stop'")]))
    run.finish("start")
    # Round 1: b's condition is false: b is skipped, its input to m resolves as not fired.
    decision = run.finish("h", tool_b=False)
    assert (decision.activate, decision.skipped) == (["c"], ["b"])
    assert run.joins == {"m": {"edges": {"3": False}, "started": False}}
    assert run.finish("c").activate == ["m"]
    assert run.finish("m", "again").activate == ["h"]
    # Round 2: b is taken; m waits for it again.
    assert run.finish("h", tool_b=True).activate == ["b", "c"]
    assert run.finish("c").activate == []
    assert run.finish("b").activate == ["m"]
    assert run.finish("m", "stop").activate == ["done"]
    assert run.joins == {}


def test_a_round_with_every_branch_dead_skips_the_join_and_ends_the_loop() -> None:
    run = Run(build(["start:start", "h", "b", "c", "m", "done:end"],
                    [("start", "h"), ("h", "b", "x"), ("h", "c", "y"), ("b", "m"), ("c", "m"),
                     ("m", "h", "route == 'again'"), ("m", "done", "route == 'stop'")]))
    run.finish("start")
    decision = run.finish("h")
    assert (decision.activate, decision.skipped) == ([], ["b", "c", "m"])
    assert run.joins == {}


def test_join_any_in_a_loop_starts_once_per_round() -> None:
    run = fan_loop(ANY_JOIN)
    run.finish("start")
    for _ in range(3):
        assert run.finish("h").activate == ["b", "c"]
        assert run.finish("b").activate == ["m"]
        assert run.finish("c").activate == []  # absorbed: this round's join already started
        assert run.joins == {}
        assert run.finish("m", "again").activate == ["h"]


def test_join_any_in_a_loop_whose_next_round_overtakes_the_late_branch() -> None:
    # m starts on b and goes round before c of round 1 finished: round 2's b starts round 2's m,
    # and round 1's late c is absorbed by round 1's record, not counted for round 2.
    run = fan_loop(ANY_JOIN)
    run.finish("start")
    run.finish("h")
    assert run.finish("b").activate == ["m"]
    assert run.finish("m", "again").activate == ["h"]
    assert run.finish("h").activate == ["b", "c"]
    assert run.finish("b").activate == ["m"]  # round 2's own start
    assert run.joins == {"m": {"edges": {"3": True}, "started": True,
                               "next": [{"edges": {"3": True}, "started": True}]}}
    assert run.finish("c").activate == []  # round 1's late branch
    assert run.joins == {"m": {"edges": {"3": True}, "started": True}}
    assert run.finish("c").activate == []  # round 2's
    assert run.joins == {}
    assert run.finish("m", "stop").activate == ["done"]


def test_a_loop_with_a_fan_out_fan_in_and_a_conditional_exit_before_the_join() -> None:
    # h checks first whether it is done; otherwise it calls two tools in parallel and joins them.
    run = Run(build(["start:start", "h", "b", "c", "m", "done:end"],
                    [("start", "h"), ("h", "b", "route == 'tools'"), ("h", "c", "route == 'tools'"),
                     ("b", "m"), ("c", "m"), ("m", "h"), ("h", "done", "route == 'stop'")]))
    run.finish("start")
    for _ in range(2):
        assert run.finish("h", "tools").activate == ["b", "c"]
        assert run.finish("b").activate == []
        assert run.finish("c").activate == ["m"]
        assert run.finish("m").activate == ["h"]
    final = run.finish("h", "stop")
    # The loop is left at h: the branches it did not take stay unrun, not skipped.
    assert (final.activate, final.skipped) == (["done"], [])
    assert run.joins == {}


NESTED = [
    ("start", "plan"),
    ("plan", "b"), ("plan", "c"), ("b", "m"), ("c", "m"),              # outer round: fan-out, join
    ("m", "act"),                                                       # inner loop: act <-> tool
    ("act", "tool", "route == 'tool'"), ("tool", "act"),
    ("act", "check", "route == 'done'"),
    ("check", "plan", "again"), ("check", "done", "stop"),            # back to the outer loop, or out
]


def test_nested_loops_join_once_per_outer_round_while_the_inner_loop_runs() -> None:
    graph = build(["start:start", "plan", "b", "c", "m", "act", "tool", "check", "done:end"], NESTED)
    assert sorted(e.label for e in graph.edges if graph.is_back_edge(e)) == ["check -> plan", "tool -> act"]
    run = Run(graph)
    run.finish("start")
    for inner_rounds in (2, 0, 1):
        assert run.finish("plan").activate == ["b", "c"]
        assert run.finish("c").activate == []
        assert run.finish("b").activate == ["m"]
        assert run.finish("m").activate == ["act"]
        for _ in range(inner_rounds):
            # The inner loop's exit to check stays open while act goes round: check is not skipped.
            decision = run.finish("act", "tool")
            assert (decision.activate, decision.skipped) == (["tool"], [])
            assert run.finish("tool").activate == ["act"]
        decision = run.finish("act", "done")
        assert (decision.activate, decision.skipped) == (["check"], [])  # nor is tool, left behind
        assert run.joins == {}
        assert run.finish("check", again=True).activate == ["plan"]
    run.finish("plan")
    run.finish("b")
    run.finish("c")
    run.finish("m")
    run.finish("act", "done")
    assert run.finish("check", stop=True).activate == ["done"]
    assert run.joins == {}


def test_a_join_after_a_loop_with_a_join_inside_waits_for_the_loop_to_end() -> None:
    run = Run(build(["start:start", "s", "h", "b", "c", "m", "side", "after", "done:end"],
                    [("start", "s"), ("s", "h"), ("s", "side"), ("h", "b"), ("h", "c"), ("b", "m"), ("c", "m"),
                     ("m", "h", "route == 'again'"), ("m", "after", "route == 'stop'"), ("side", "after"),
                     ("after", "done")]))
    run.finish("s")
    assert run.finish("side").activate == []
    for _ in range(2):
        run.finish("h")
        run.finish("b")
        run.finish("c")
        assert run.finish("m", "again").activate == ["h"]
    run.finish("h")
    run.finish("b")
    run.finish("c")
    assert run.finish("m", "stop").activate == ["after"]
    assert run.joins == {}


def test_an_inner_loop_left_from_either_node_into_a_join_of_the_outer_round() -> None:
    # The outer round runs the inner loop a <-> b beside a side branch; k joins them. The inner loop
    # may end from a or from b: both exits feed one input of k, resolved by the node that stops.
    graph = build(["start:start", "plan", "a", "b", "side", "k", "done:end"],
                  [("start", "plan"), ("plan", "a"), ("plan", "side"),
                   ("a", "b", "route == 'b'"), ("b", "a", "route == 'a'"),
                   ("a", "k", "route == 'out'"), ("b", "k", "route == 'out'"), ("side", "k"),
                   ("k", "plan", "again"), ("k", "done", "stop")])
    assert graph.join_slots("k") == ["loop:a", "7"]
    run = Run(graph)
    run.finish("start")
    for leaver in ("b", "a"):
        assert run.finish("plan").activate == ["a", "side"]
        assert run.finish("side").activate == []
        assert run.finish("a", "b").activate == ["b"]
        assert run.finish("b", "a").activate == ["a"]
        if leaver == "b":
            assert run.finish("a", "b").activate == ["b"]
        decision = run.finish(leaver, "out")
        assert (decision.activate, decision.skipped) == (["k"], [])
        assert run.joins == {}
        assert run.finish("k", again=True).activate == ["plan"]


def test_a_loop_entered_at_either_node_never_waits_for_its_entry_again() -> None:
    # r may enter the loop a <-> b at a or at b (an irreducible loop): the edges between a and b both
    # start their target by themselves, so b does not wait in round 2 for r's edge of round 1.
    graph = build(["start:start", "r", "a", "b", "done:end"],
                  [("start", "r"), ("r", "a", "x"), ("r", "b", "y"), ("a", "b", "route == 'b'"),
                   ("b", "a", "route == 'a'"), ("a", "done", "route == 'out'"), ("b", "done", "route == 'out'")])
    assert sorted(e.label for e in graph.edges if graph.is_back_edge(e)) == ["a -> b", "b -> a"]
    run = Run(graph)
    run.finish("start")
    assert run.finish("r", x=True, y=True).activate == ["a", "b"]
    assert run.finish("b", "a").activate == ["a"]
    for _ in range(2):
        assert run.finish("a", "b").activate == ["b"]
        assert run.finish("b", "a").activate == ["a"]
    assert run.finish("a", "out").activate == ["done"]
    assert run.joins == {}
