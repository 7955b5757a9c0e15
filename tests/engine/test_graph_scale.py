"""Large graphs: the graph's structure (loops, back edges, join inputs) and validation cost work and
memory linear in the graph's size, and a graph past the node or edge limit is refused.

Work is counted, not timed: the Python lines the engine executes (a line tracer limited to
workflows/engine/) and the memory it allocates (tracemalloc's peak), on chains of 1,000 and 2,000
nodes. Linear work doubles; the old per-node reachability (a set of everything downstream for every
node, compared pair by pair) quadrupled.
"""

from __future__ import annotations

import random
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from workflows.engine import limits
from workflows.engine.graph import Edge, Graph, GraphSettings, Node
from workflows.engine.scheduling import JoinState, advance, edges_fired
from workflows.engine.validation import validate_graph

ENGINE = str(Path(__file__).resolve().parents[2] / "workflows" / "engine")


def chain_graph(n: int) -> dict[str, Any]:
    """start -> n-2 python nodes -> end: n nodes, n-1 edges."""
    ids = ["start", *(f"n{i}" for i in range(n - 2)), "done"]
    nodes = [{"id": "start", "type": "start"},
             *({"id": node_id, "type": "python", "config": {"function": "noop"}} for node_id in ids[1:-1]),
             {"id": "done", "type": "end"}]
    return {"nodes": nodes, "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)]}


def first_scheduling(data: dict[str, Any]) -> Graph:
    """What a start does with a version it has not seen: parse it, then schedule the start node."""
    graph = Graph.from_json(data)
    decision = advance(graph, {}, "start", edges_fired(graph, "start", lambda edge: True))
    assert decision.activate == ["n0"]
    return graph


def run_to_the_end(graph: Graph) -> None:
    """Every node of the chain finishes in turn, as the instance runs."""
    joins: JoinState = {}
    node = "start"
    while node != "done":
        (node,) = advance(graph, joins, node, edges_fired(graph, node, lambda edge: True)).activate


@contextmanager
def counting_engine_lines() -> Iterator[list[int]]:
    """Count the lines executed in workflows/engine/ (every loop iteration included)."""
    count = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            count[0] += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(ENGINE) else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield count
    finally:
        sys.settrace(previous)


def lines_run(work: Callable[[], object]) -> int:
    with counting_engine_lines() as count:
        work()
    return count[0]


def peak_bytes(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        kept = work()  # held until the peak is read: the structure itself must count
        peak = tracemalloc.get_traced_memory()[1]
        del kept
    finally:
        tracemalloc.stop()
    return peak


@pytest.fixture
def two_thousand_nodes_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Validation is measured past the documented bound, to see its growth.
    monkeypatch.setattr(limits, "MAX_NODES", 2_000)


def test_scheduling_work_is_linear_in_the_chain_length() -> None:
    small, large = chain_graph(1_000), chain_graph(2_000)
    first_scheduling(chain_graph(10))  # warm caches (node kinds, imports) before counting
    work = {n: lines_run(partial(first_scheduling, data)) for n, data in ((1, small), (2, large))}
    # The old code ran ~n²/2 lines here: 500,000 at 1,000 nodes, four times that at 2,000.
    assert work[1] < 100 * 1_000, work  # ~75 lines per node
    assert work[2] / work[1] < 2.2, work
    graphs = {n: first_scheduling(data) for n, data in ((1, small), (2, large))}
    whole = {n: lines_run(partial(run_to_the_end, graph)) for n, graph in graphs.items()}
    assert whole[2] / whole[1] < 2.2, whole


def test_scheduling_memory_is_linear_in_the_chain_length() -> None:
    small, large = chain_graph(1_000), chain_graph(2_000)
    first_scheduling(chain_graph(10))
    peak = {n: peak_bytes(partial(first_scheduling, data)) for n, data in ((1, small), (2, large))}
    # The old code held a set of every node downstream for every node: ~30 MB at 1,000 nodes.
    assert peak[1] < 5_000_000, peak
    assert peak[2] / peak[1] < 2.5, peak


def test_validation_work_is_linear_in_the_chain_length(two_thousand_nodes_allowed: None) -> None:
    small, large = chain_graph(1_000), chain_graph(2_000)
    assert validate_graph(chain_graph(10)) == []
    work = {n: lines_run(partial(validate_graph, data)) for n, data in ((1, small), (2, large))}
    assert work[2] / work[1] < 2.2, work


def test_the_node_and_edge_limits_are_refused_with_the_bound_named() -> None:
    assert validate_graph(chain_graph(limits.MAX_NODES)) == []
    issues = validate_graph(chain_graph(limits.MAX_NODES + 1))
    assert [issue.message for issue in issues] == ["the graph has 1,001 nodes: 1,000 at most (MAX_NODES)"]
    assert issues[0].field == "nodes"
    old_case = validate_graph(chain_graph(4_000))
    assert [issue.message for issue in old_case] == ["the graph has 4,000 nodes: 1,000 at most (MAX_NODES)"]

    # Edges: a start fanning out to 99 nodes that each lead to every one of 51 ends (one edge each way
    # is 5,049 + 99 edges), with few enough nodes.
    dense = chain_graph(3)
    middle = [f"m{i}" for i in range(99)]
    ends = [f"e{i}" for i in range(51)]
    dense["nodes"] += [{"id": m, "type": "python", "config": {"function": "noop"}} for m in middle]
    dense["nodes"] += [{"id": e, "type": "end"} for e in ends]
    dense["edges"] += [{"source": "start", "target": m} for m in middle]
    dense["edges"] += [{"source": m, "target": e} for m in middle for e in ends]
    assert len(dense["edges"]) > limits.MAX_EDGES
    assert [issue.message for issue in validate_graph(dense)] == [
        f"the graph has {len(dense['edges']):,} edges: 5,000 at most (MAX_EDGES)"]


# --- The same answers as the definitions (reachability compared pair by pair) on random graphs ---

def reference(graph: Graph) -> tuple[dict[int, bool], dict[str, frozenset[str]], dict[str, list[str]]]:
    """The definitions the scheduler's README semantics are written in, computed the slow way."""
    reach = {node_id: graph.reachable_from(node_id) for node_id in graph.nodes}
    back = {edge.index: edge.source in reach[edge.target] for edge in graph.edges}
    cycles = {node_id: frozenset(o for o in reach[node_id] if node_id in reach[o]) for node_id in graph.nodes}

    def slot(edge: Edge) -> str:
        loop = cycles[edge.source]
        return "loop:" + min(loop) if loop and edge.target not in loop else str(edge.index)

    slots: dict[str, list[str]] = {node_id: [] for node_id in graph.nodes}
    for edge in graph.edges:
        if not back[edge.index] and slot(edge) not in slots[edge.target]:
            slots[edge.target].append(slot(edge))
    return back, cycles, slots


@pytest.mark.parametrize("seed", range(40))
def test_loops_back_edges_and_join_inputs_match_their_definitions(seed: int) -> None:
    rng = random.Random(seed)
    ids = [f"v{i}" for i in range(rng.randint(2, 14))]
    edges = [Edge(index=i, source=rng.choice(ids), target=rng.choice(ids))
             for i in range(rng.randint(1, 3 * len(ids)))]
    graph = Graph([Node(id=node_id, type="python") for node_id in ids], edges, GraphSettings())
    back, cycles, slots = reference(graph)
    assert {edge.index: graph.is_back_edge(edge) for edge in edges} == back
    assert {node_id: graph.cycle_of(node_id) for node_id in ids} == cycles
    assert {node_id: graph.join_slots(node_id) for node_id in ids} == slots
