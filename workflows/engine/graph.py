"""The graph JSON as Python objects, with the structural questions the scheduler asks of it.

A Graph is built only from JSON that validation accepted; it is immutable and cached per
definition version, so workers parse each version once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class Edge:
    index: int
    source: str
    target: str
    when: str | None = None

    @property
    def label(self) -> str:
        return f"{self.source} -> {self.target}"


@dataclass(frozen=True)
class Node:
    id: str
    type: str
    config: dict[str, Any] = field(default_factory=dict)
    queue: str | None = None
    retry: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    join: str = "all"
    fallback: dict[str, Any] | None = None
    compensate: Any = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class GraphSettings:
    max_transitions: int | None = None
    ttl_s: float | None = None
    max_concurrency: int | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None


class Graph:
    def __init__(self, nodes: Iterable[Node], edges: Iterable[Edge], settings: GraphSettings,
                 input_schema: dict[str, Any] | None = None) -> None:
        self.nodes: dict[str, Node] = {node.id: node for node in nodes}
        self.edges: list[Edge] = list(edges)
        self.settings = settings
        # The declared start input (JSON Schema, workflows/engine/inputs.py), or None.
        self.input_schema = input_schema
        self._out: dict[str, list[Edge]] = {node_id: [] for node_id in self.nodes}
        self._in: dict[str, list[Edge]] = {node_id: [] for node_id in self.nodes}
        for edge in self.edges:
            self._out.setdefault(edge.source, []).append(edge)
            self._in.setdefault(edge.target, []).append(edge)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Graph:
        nodes = [
            Node(
                id=raw["id"],
                type=raw["type"],
                config=dict(raw.get("config") or {}),
                queue=raw.get("queue"),
                retry=dict(raw.get("retry") or {}),
                timeout_s=raw.get("timeout_s"),
                join=raw.get("join", "all"),
                fallback=raw.get("fallback"),
                compensate=raw.get("compensate"),
                raw=raw,
            )
            for raw in data.get("nodes", [])
        ]
        edges = [
            Edge(index=i, source=raw["source"], target=raw["target"], when=raw.get("when") or None)
            for i, raw in enumerate(data.get("edges", []))
        ]
        raw_settings = data.get("settings") or {}
        settings = GraphSettings(
            max_transitions=raw_settings.get("max_transitions"),
            ttl_s=raw_settings.get("ttl_s"),
            max_concurrency=raw_settings.get("max_concurrency"),
            budget_usd=raw_settings.get("budget_usd"),
            budget_tokens=raw_settings.get("budget_tokens"),
        )
        input_schema = data.get("input")
        return cls(nodes, edges, settings, input_schema if isinstance(input_schema, dict) else None)

    def outgoing(self, node_id: str) -> list[Edge]:
        return self._out.get(node_id, [])

    def incoming(self, node_id: str) -> list[Edge]:
        return self._in.get(node_id, [])

    @cached_property
    def start_node(self) -> str:
        return next(node.id for node in self.nodes.values() if node.type == "start")

    def reachable_from(self, node_id: str) -> set[str]:
        """The nodes reachable from `node_id` by one edge or more (itself only when it lies on a loop).

        One walk, O(V + E): asked once per question (validation, a rerun), never per node pair."""
        seen: set[str] = set()
        stack = [edge.target for edge in self.outgoing(node_id)]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(edge.target for edge in self.outgoing(current))
        return seen

    @cached_property
    def _loops(self) -> Loops:
        return find_loops(self.nodes, self.outgoing)

    def is_back_edge(self, edge: Edge) -> bool:
        """An edge closing a cycle: its source is downstream of its target.

        Back edges re-activate their target on their own; only forward edges take part in a join.
        The source is downstream of the target exactly when both lie in one strongly connected
        component (the edge itself leads from source to target), so this is one lookup.
        """
        component = self._loops.component
        return component.get(edge.source, -1) == component.get(edge.target, -2)

    def forward_incoming(self, node_id: str) -> list[Edge]:
        return [edge for edge in self.incoming(node_id) if not self.is_back_edge(edge)]

    def cycle_of(self, node_id: str) -> frozenset[str]:
        """The nodes of the loop `node_id` lies on (its strongly connected component), or none."""
        return self._loops.members.get(node_id, frozenset())

    def join_slot(self, edge: Edge) -> str:
        """The join input a forward edge feeds. Edges leaving one loop for the same target share one
        input: the loop is left once, from whichever of its nodes decides to stop."""
        loop = self.cycle_of(edge.source)
        if loop and edge.target not in loop:
            return self._loops.slot[edge.source]
        return str(edge.index)

    @cached_property
    def _join_slots(self) -> dict[str, list[str]]:
        slots: dict[str, dict[str, None]] = {node_id: {} for node_id in self.nodes}
        for edge in self.edges:
            if not self.is_back_edge(edge):
                slots.setdefault(edge.target, {})[self.join_slot(edge)] = None  # ordered, each once
        return {node_id: list(found) for node_id, found in slots.items()}

    def join_slots(self, node_id: str) -> list[str]:
        """The inputs a join at `node_id` waits for (keys of its record in the instance state)."""
        return self._join_slots.get(node_id, [])


@dataclass(frozen=True)
class Loops:
    """The graph's loops, from one pass over it; memory linear in its size (one frozenset per loop,
    shared by its nodes)."""

    component: dict[str, int]             # node -> its strongly connected component's number
    members: dict[str, frozenset[str]]    # node on a loop -> the nodes of that loop
    slot: dict[str, str]                  # node on a loop -> the join input its exits feed ("loop:<min>")


def find_loops(nodes: Iterable[str], outgoing: Callable[[str], list[Edge]]) -> Loops:
    """Tarjan's strongly connected components, iterative (a 1,000-node chain must not recurse 1,000
    deep), O(V + E): each node is entered once and each of its edges looked at once.

    A component is a loop when it has two nodes or more, or one node with an edge to itself.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    component: dict[str, int] = {}
    members: dict[str, frozenset[str]] = {}
    slot: dict[str, str] = {}
    numbered = 0  # components closed so far

    def enter(node_id: str) -> tuple[str, Iterator[Edge]]:
        index[node_id] = low[node_id] = len(index)
        stack.append(node_id)
        on_stack.add(node_id)
        return node_id, iter(outgoing(node_id))

    for root in nodes:
        if root in index:
            continue
        work = [enter(root)]
        while work:
            node_id, edges = work[-1]
            for edge in edges:
                target = edge.target
                if target not in index:
                    work.append(enter(target))
                    break
                if target in on_stack:
                    low[node_id] = min(low[node_id], index[target])
            else:
                # Every edge of node_id looked at: close it.
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node_id])
                if low[node_id] == index[node_id]:
                    found: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        found.append(member)
                        if member == node_id:
                            break
                    for member in found:
                        component[member] = numbered
                    numbered += 1
                    if len(found) > 1 or any(edge.target == node_id for edge in outgoing(node_id)):
                        loop = frozenset(found)
                        name = "loop:" + min(loop)
                        for member in found:
                            members[member] = loop
                            slot[member] = name
    return Loops(component=component, members=members, slot=slot)
