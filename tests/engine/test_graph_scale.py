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


def loops_graph(n: int) -> dict[str, Any]:
    """About n nodes: an outer loop whose body is a chain of small inner loops (i_k <-> b_k), each
    fanning out to two tools joined inside it: loops nested two deep, n/4 of them."""
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "start"}, {"id": "done", "type": "end"}]
    edges: list[dict[str, Any]] = [{"source": "start", "target": "i0"}]
    k = n // 4
    for i in range(k):
        nodes += [{"id": f"{x}{i}", "type": "python", "config": {"function": "noop"}} for x in "itum"]
        edges += [{"source": f"i{i}", "target": f"t{i}"}, {"source": f"i{i}", "target": f"u{i}"},
                  {"source": f"t{i}", "target": f"m{i}"}, {"source": f"u{i}", "target": f"m{i}"},
                  {"source": f"m{i}", "target": f"i{i}", "when": "again"},
                  {"source": f"m{i}", "target": f"i{i + 1}" if i + 1 < k else "done", "when": "not again"}]
    edges.append({"source": f"m{k - 1}", "target": "i0", "when": "outer"})
    return {"nodes": nodes, "edges": edges}


def test_loop_nesting_work_is_linear_in_the_number_of_loops() -> None:
    def structure(data: dict[str, Any]) -> Graph:
        graph = Graph.from_json(data)
        graph.join_slots("done")  # finds loops, back edges, nesting and every join input
        return graph

    structure(loops_graph(40))
    small = structure(loops_graph(1_000))
    assert small.join_slots("m1") == ["9", "10"] and small.in_loop("i0", "i1") and not small.in_loop("i1", "i2")
    work = {n: lines_run(partial(structure, loops_graph(size))) for n, size in ((1, 1_000), (2, 2_000))}
    assert work[2] / work[1] < 2.2, work


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

def reference(graph: Graph) -> tuple[dict[str, frozenset[str]], dict[str, list[str]]]:
    """The definitions the scheduler's README semantics are written in, computed the slow way: the
    loops (strongly connected components) and the join inputs, with an edge leaving a component
    feeding the component's input. Edges inside a component take the graph's own answer when it is
    an inner loop's exit (checked against the nesting in check_inner_exit)."""
    reach = {node_id: graph.reachable_from(node_id) for node_id in graph.nodes}
    cycles = {node_id: frozenset(o for o in reach[node_id] if node_id in reach[o]) for node_id in graph.nodes}

    def slot(edge: Edge) -> str:
        loop = cycles[edge.source]
        if loop and edge.target not in loop:
            return "loop:" + min(loop)
        if graph.join_slot(edge) != str(edge.index):
            check_inner_exit(graph, edge)
            return graph.join_slot(edge)
        return str(edge.index)

    slots: dict[str, list[str]] = {node_id: [] for node_id in graph.nodes}
    for edge in graph.edges:
        if not graph.is_back_edge(edge) and slot(edge) not in slots[edge.target]:
            slots[edge.target].append(slot(edge))
    return cycles, slots


def check_inner_exit(graph: Graph, edge: Edge) -> None:
    """An edge inside one component that feeds a loop's input leaves a loop nested in it."""
    header = graph.join_slot(edge).removeprefix("loop:")
    assert header in graph.loop_headers(), edge
    assert graph.in_loop(header, edge.source) and not graph.in_loop(header, edge.target), edge
    assert edge.target in graph.cycle_of(edge.source), edge


def forward_reach(graph: Graph, node_id: str) -> set[str]:
    """The nodes reachable from `node_id` over forward edges only (itself included)."""
    seen = {node_id}
    stack = [node_id]
    while stack:
        for edge in graph.outgoing(stack.pop()):
            if not graph.is_back_edge(edge) and edge.target not in seen:
                seen.add(edge.target)
                stack.append(edge.target)
    return seen


def check_back_edges(graph: Graph) -> None:
    """Back edges are what the scheduler needs of them: each lies inside one loop, and without them
    no cycle is left. An edge from inside a loop into a node the loop is entered at from outside is
    one (an entry never waits for its outside edge again in a later round)."""
    reach = {node_id: graph.reachable_from(node_id) for node_id in graph.nodes}
    entries = {e.target for e in graph.edges if graph.cycle_of(e.target) and e.source not in graph.cycle_of(e.target)}
    for edge in graph.edges:
        if graph.is_back_edge(edge):
            assert edge.source in reach[edge.target] and edge.target in reach[edge.source], edge
        else:
            assert edge.source not in forward_reach(graph, edge.target), edge
            assert not (edge.target in entries and edge.source in graph.cycle_of(edge.target)), edge


@pytest.mark.parametrize("seed", range(40))
def test_loops_back_edges_and_join_inputs_match_their_definitions(seed: int) -> None:
    rng = random.Random(seed)
    ids = [f"v{i}" for i in range(rng.randint(2, 14))]
    edges = [Edge(index=i, source=rng.choice(ids), target=rng.choice(ids))
             for i in range(rng.randint(1, 3 * len(ids)))]
    graph = Graph([Node(id=node_id, type="python") for node_id in ids], edges, GraphSettings())
    cycles, slots = reference(graph)
    check_back_edges(graph)
    assert {node_id: graph.cycle_of(node_id) for node_id in ids} == cycles
    assert {node_id: graph.join_slots(node_id) for node_id in ids} == slots


# --- Nested loops in structured graphs: back edges and loop bodies against their textbook definitions

def structured(rng: random.Random, size: int) -> Graph:
    """A random graph built the way workflows are drawn (sequences, branches that merge, loops with
    early exits, nested), so every loop is entered at one node (a reducible graph)."""
    nodes: list[str] = []
    pairs: list[tuple[str, str]] = []

    def new() -> str:
        nodes.append(f"n{len(nodes)}")
        return nodes[-1]

    def region(budget: int) -> tuple[str, str, list[str]]:
        """(entry, exit, its nodes)."""
        kind = rng.choice(["node", "seq", "branch", "loop", "loop"]) if budget > 1 else "node"
        if kind == "node":
            only = new()
            return only, only, [only]
        if kind == "seq":
            e1, x1, in1 = region(budget // 2)
            e2, x2, in2 = region(budget // 2)
            pairs.append((x1, e2))
            return e1, x2, in1 + in2
        if kind == "branch":
            split = new()
            (e1, x1, in1), (e2, x2, in2) = region(budget // 2), region(budget // 2)
            merge = new()
            pairs.extend([(split, e1), (split, e2), (x1, merge), (x2, merge)])
            return split, merge, [split, *in1, *in2, merge]
        header = new()
        entry, last, body = region(budget - 2)
        after = new()
        pairs.extend([(header, entry), (last, header), (header, after)])
        if rng.random() < 0.5:
            pairs.append((rng.choice(body), after))  # an early exit ("break")
        return header, after, [header, *body, after]

    start = new()
    entry, _, _ = region(size)
    pairs.insert(0, (start, entry))
    edges = [Edge(index=i, source=s, target=t) for i, (s, t) in enumerate(pairs)]
    return Graph([Node(id=start, type="start"), *(Node(id=n, type="python") for n in nodes[1:])], edges,
                 GraphSettings())


def dominators(graph: Graph) -> dict[str, set[str]]:
    """x dominates y when every path from the start to y passes x (the slow way: remove x, walk)."""
    result: dict[str, set[str]] = {}
    for x in graph.nodes:
        seen = {graph.start_node} if x != graph.start_node else set()
        stack = list(seen)
        while stack:
            for edge in graph.outgoing(stack.pop()):
                if edge.target != x and edge.target not in seen:
                    seen.add(edge.target)
                    stack.append(edge.target)
        result[x] = {y for y in graph.nodes if y not in seen}
    return result


@pytest.mark.parametrize("seed", range(40))
def test_nested_loops_match_the_natural_loops_of_a_structured_graph(seed: int) -> None:
    graph = structured(random.Random(seed), 24)
    dom = dominators(graph)
    # A back edge is an edge whose target dominates its source.
    assert {e.index for e in graph.edges if graph.is_back_edge(e)} == {
        e.index for e in graph.edges if e.source in dom[e.target]}
    # The loop entered at h: h and every node that reaches one of h's back edges without passing h.
    for header in graph.loop_headers():
        body = {header}
        stack = [e.source for e in graph.incoming(header) if graph.is_back_edge(e)]
        while stack:
            current = stack.pop()
            if current not in body:
                body.add(current)
                stack.extend(e.source for e in graph.incoming(current))
        assert {n for n in graph.nodes if graph.in_loop(header, n)} == body, header
