"""Priorities and the critical path (workflows/engine/priorities.py): levels, queue names, the
workers' fair order, and each node's longest remaining path, loops included, in linear work."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.engine.test_graph_scale import chain_graph, lines_run
from workflows.engine.graph import Graph
from workflows.engine.priorities import (
    PriorityInvalid,
    fair_order,
    kind_of,
    parse_priority,
    priority_of,
    queue_name,
    queue_names,
)
from workflows.engine.validation import validate_graph


def graph(edges: list[tuple[str, str]], types: dict[str, str] | None = None) -> Graph:
    ids = dict.fromkeys(node for edge in edges for node in edge)
    types = {"s": "start", "e": "end", **(types or {})}
    return Graph.from_json({"nodes": [{"id": i, "type": types.get(i, "python")} for i in ids],
                            "edges": [{"source": a, "target": b} for a, b in edges]})


def test_levels_and_queue_names() -> None:
    assert parse_priority(None) == "normal"
    assert parse_priority("high") == "high"
    for bad in ("urgent", 1, "", ["high"]):
        with pytest.raises(PriorityInvalid) as caught:
            parse_priority(bad, "items[2].priority")
        assert caught.value.field == "items[2].priority"
        assert "items[2].priority" in str(caught.value)
    assert queue_names("default") == ["default:high", "default", "default:low"]
    assert queue_name("ai", "normal") == "ai"
    assert [kind_of(q) for q in queue_names("io")] == ["io", "io", "io"]
    assert [priority_of(q) for q in queue_names("io")] == ["high", "normal", "low"]


def test_fair_order_takes_the_lowest_first_every_nth_turn() -> None:
    queues = ["default:low", "io", "default:high", "default", "io:high", "io:low"]
    strict = ["default:high", "io:high", "io", "default", "default:low", "io:low"]
    assert fair_order(queues, 0, 3) == strict
    assert fair_order(queues, 1, 3) == strict
    assert fair_order(queues, 2, 3) == ["default:low", "io:low", "io", "default", "default:high", "io:high"]
    assert fair_order(queues, 3, 3) == strict
    assert all(fair_order(queues, n, 0) == strict for n in range(10))  # 0: strict priority


def test_the_longer_branch_comes_first() -> None:
    g = graph([("s", "a"), ("s", "b"), ("b", "b2"), ("b2", "b3"), ("a", "j"), ("b3", "j"), ("j", "e")])
    assert g.remaining["e"] == 1 and g.remaining["j"] == 2
    assert g.remaining["a"] == 3 and g.remaining["b"] == 5 and g.remaining["s"] == 6
    assert g.critical_first(["a", "b"]) == ["b", "a"]
    assert g.critical_first(["b3", "a", "b2"]) == ["b2", "b3", "a"]  # 4, then 3 and 3 in their order


def test_ties_keep_the_graphs_order() -> None:
    g = graph([("s", "x"), ("s", "y"), ("s", "z"), ("x", "e"), ("y", "e"), ("z", "e")])
    assert g.critical_first(["x", "y", "z"]) == ["x", "y", "z"]
    assert g.critical_first(["z", "x", "y"]) == ["z", "x", "y"]


def test_a_loop_counts_once_and_its_back_edge_is_left_out() -> None:
    # s -> h -> b -> m -> h (back edge), m -> e; a short branch s -> q -> e beside it.
    g = graph([("s", "h"), ("h", "b"), ("b", "m"), ("m", "h"), ("m", "e"), ("s", "q"), ("q", "e")])
    assert g.remaining == {"s": 5, "h": 4, "b": 3, "m": 2, "e": 1, "q": 2}
    assert g.critical_first(["q", "h"]) == ["h", "q"]


def test_nested_loops() -> None:
    # Outer loop h1 .. m1 -> h1, inner loop h2 -> x -> h2 inside it.
    g = graph([("s", "h1"), ("h1", "h2"), ("h2", "x"), ("x", "h2"), ("x", "m1"), ("m1", "h1"), ("m1", "e")])
    assert g.remaining["e"] == 1 and g.remaining["m1"] == 2 and g.remaining["x"] == 3
    assert g.remaining["h2"] == 4 and g.remaining["h1"] == 5 and g.remaining["s"] == 6


def test_remaining_lengths_are_linear_work() -> None:
    def compute(data: dict[str, Any]) -> dict[str, int]:
        return Graph.from_json(data).remaining

    small, large = chain_graph(1_000), chain_graph(2_000)
    assert compute(large)["start"] == 2_000  # deep chains: no recursion limit
    work = {n: lines_run(partial(compute, data)) for n, data in ((1, small), (2, large))}
    assert work[2] < 2.2 * work[1], work


def test_node_priority_is_validated() -> None:
    data: dict[str, Any] = {"nodes": [{"id": "s", "type": "start"},
                                      {"id": "a", "type": "python", "config": {"function": "noop"},
                                       "priority": "urgent"},
                                      {"id": "e", "type": "end"}],
                            "edges": [{"source": "s", "target": "a"}, {"source": "a", "target": "e"}]}
    issues = validate_graph(data)
    assert issues and any("priority" in str(issue) for issue in issues), issues
    data["nodes"][1]["priority"] = "high"
    assert validate_graph(data) == []
    assert Graph.from_json(data).nodes["a"].priority == "high"
