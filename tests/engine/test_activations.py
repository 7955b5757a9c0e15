"""engine/activations.py: the loop breaker's default limit (one pass over every node, at least the
configured default) and the validation that refuses a max_transitions no run can finish within."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.conftest import graph
from workflows.engine import activations, limits
from workflows.engine.graph import Graph
from workflows.engine.validation import validate_graph


def chain_of(count: int, **settings: Any) -> dict[str, Any]:
    """start -> n1 ... n<count> -> done: count + 2 nodes."""
    ids = ["start", *(f"n{i}" for i in range(1, count + 1)), "done"]
    return graph(["start:start", *ids[1:-1], "done:end"], list(zip(ids, ids[1:], strict=False)), **settings)


def fan_out(width: int, **settings: Any) -> dict[str, Any]:
    """start -> p1 ... p<width> (parallel) -> done (join all)."""
    branches = [f"p{i}" for i in range(1, width + 1)]
    return graph(["start:start", *branches, "done:end"],
                 [*(("start", b) for b in branches), *((b, "done") for b in branches)], **settings)


def loop(**settings: Any) -> dict[str, Any]:
    """start -> a <-> b (conditional) -> done: the shortest run is start -> a -> done."""
    return graph(["start:start", "a", "b", "done:end"],
                 [("start", "a"), ("a", "b", "context.again"), ("b", "a"), ("a", "done", "not context.again")],
                 **settings)


def tools_llm(**config: Any) -> dict[str, Any]:
    return {"id": "agent", "type": "llm", "config": {
        "provider": "scripted", "prompt": "p", "script": [{"text": "ok"}],
        "tools": [{"name": "look", "target": {"type": "python", "function": "noop"}}], **config}}


def test_one_pass_counts_every_node_once() -> None:
    assert activations.one_pass(Graph.from_json(chain_of(15))) == 17
    assert activations.one_pass(Graph.from_json(fan_out(30))) == 32
    assert activations.one_pass(Graph.from_json(loop())) == 4


def test_one_pass_counts_the_tool_rounds_and_calls_an_llm_node_may_take() -> None:
    def frame(node: dict[str, Any]) -> Graph:
        return Graph.from_json(graph(["start:start", node, "done:end"], [("start", "agent"), ("agent", "done")]))

    # Each round: the llm step's next attempt and (estimated) one call of each declared tool.
    assert activations.one_pass(frame(tools_llm())) == 3 + 8 * 2  # the default max_tool_rounds, one tool
    assert activations.one_pass(frame(tools_llm(max_tool_rounds=3))) == 3 + 3 * 2
    two = {"name": "find", "target": {"type": "python", "function": "noop"}}
    widened = tools_llm(max_tool_rounds=3)
    widened["config"]["tools"] = [*widened["config"]["tools"], two]
    assert activations.one_pass(frame(widened)) == 3 + 3 * 3
    no_tools = {"id": "agent", "type": "llm", "config": {"provider": "scripted", "prompt": "p"}}
    assert activations.one_pass(frame(no_tools)) == 3


def test_one_pass_leaves_room_for_a_planner_nodes_largest_plan() -> None:
    def frame(**config: Any) -> Graph:
        planner = {"id": "plan", "type": "planner", "config": {"objective": "o", **config}}
        return Graph.from_json(graph(["start:start", planner, "done:end"], [("start", "plan"), ("plan", "done")]))

    assert activations.one_pass(frame()) == 3 + 20  # the default max_nodes
    assert activations.one_pass(frame(max_nodes=5)) == 3 + 5


def test_compensations_do_not_count() -> None:
    data = chain_of(2)
    data["nodes"][1]["compensate"] = "noop"
    assert activations.one_pass(Graph.from_json(data)) == 4


@pytest.mark.parametrize(("data", "floor", "expected"), [
    (chain_of(3), 10, 10),          # a small graph: the configured default
    (chain_of(15), 10, 17),         # a long chain: one pass over its 17 nodes
    (fan_out(40), 10, 42),          # a wide fan-out
    (chain_of(15), 50, 50),         # the configured default when it is more
    (loop(), 10, 10),
])
def test_the_default_is_one_pass_at_least_the_configured_default(data: dict[str, Any], floor: int,
                                                                 expected: int) -> None:
    built = Graph.from_json(data)
    assert activations.default_max_transitions(built, floor) == expected
    assert activations.max_transitions(built, floor) == expected


def test_a_graphs_own_max_transitions_is_taken_as_it_is() -> None:
    assert activations.max_transitions(Graph.from_json(fan_out(40, max_transitions=5)), 10) == 5
    assert activations.max_transitions(Graph.from_json(chain_of(2, max_transitions=500)), 10) == 500


def test_a_1000_node_graph_gets_a_limit_within_the_bound() -> None:
    built = Graph.from_json(chain_of(limits.MAX_NODES - 2))
    assert activations.max_transitions(built, 10) == limits.MAX_NODES <= limits.MAX_TRANSITIONS


# --- Validation ------------------------------------------------------------------------------------

def test_a_max_transitions_below_the_shortest_run_is_refused_naming_the_field_and_numbers() -> None:
    issues = validate_graph(chain_of(3, max_transitions=4))
    assert [i.as_dict() for i in issues] == [{
        "field": "settings.max_transitions",
        "message": "settings.max_transitions: 4 is less than the 5 node activations of the shortest path from "
                   "the start to an end node (start -> n1 -> n2 -> n3 -> done), so every run would halt; set at "
                   "least 5, or leave it out (the default covers one pass over every node)"}]


def test_a_max_transitions_equal_to_the_shortest_run_passes() -> None:
    assert validate_graph(chain_of(3, max_transitions=5)) == []


def test_the_shortest_branch_and_the_shortest_way_round_a_loop_count() -> None:
    # A fan-out's limit may stop it past the shortest path: that is a choice, not an impossible run.
    assert validate_graph(fan_out(10, max_transitions=3)) == []
    assert "2 is less than the 3 node activations" in validate_graph(fan_out(10, max_transitions=2))[0].message
    # Conditional edges count as paths: the loop may be left at once.
    assert validate_graph(loop(max_transitions=3)) == []
    assert "(start -> a -> done)" in validate_graph(loop(max_transitions=2))[0].message
    # Of two ends, the nearer one.
    two_ends = graph(["start:start", "a", "b", "c", "far:end", "near:end"],
                     [("start", "a"), ("a", "b", "context.x"), ("b", "c"), ("c", "far"),
                      ("a", "near", "not context.x")])
    assert validate_graph({**two_ends, "settings": {"max_transitions": 3}}) == []
    assert "start -> a -> near" in validate_graph({**two_ends, "settings": {"max_transitions": 2}})[0].message


def test_a_long_path_is_shortened_in_the_message() -> None:
    [issue] = validate_graph(chain_of(100, max_transitions=10))
    assert "10 is less than the 102 node activations" in issue.message
    assert "(start -> n1 -> n2 -> n3 -> n4 -> n5 -> n6 -> n7 -> n8 -> n9 -> … -> done)" in issue.message


def test_a_wrong_max_transitions_is_reported_once_by_the_settings_check() -> None:
    issues = validate_graph(chain_of(3, max_transitions=0))
    assert [i.field for i in issues] == ["settings.max_transitions"] and "minimum of 1" in issues[0].message
    issues = validate_graph(chain_of(3, max_transitions=True))
    assert [i.field for i in issues] == ["settings.max_transitions"]


def test_no_reachable_end_reports_the_structure_only() -> None:
    data = graph(["start:start", "a", "done:end"], [("start", "a"), ("a", "a", "context.x")], max_transitions=1)
    assert not any(i.field == "settings.max_transitions" for i in validate_graph(data))


def test_an_imposed_limit_is_not_refused() -> None:
    """A planned child's max_transitions is what its parent has left: running out halts it into review."""
    assert validate_graph(chain_of(3, max_transitions=2), imposed_limit=True) == []


def test_the_largest_graph_is_checked() -> None:
    data = fan_out(limits.MAX_NODES - 2, max_transitions=2)
    assert len(data["edges"]) <= limits.MAX_EDGES
    assert [i.field for i in validate_graph(data)] == ["settings.max_transitions"]
