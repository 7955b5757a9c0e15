"""The graph JSON as Python objects, with the structural questions the scheduler asks of it.

A Graph is built only from JSON that validation accepted; it is immutable and cached per
definition version, so workers parse each version once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from workflows.engine.loops import Loops, find_loops
from workflows.engine.priorities import by_critical_path, remaining_lengths


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
    priority: str | None = None  # high / normal / low; None: the instance's
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
                priority=raw.get("priority"),
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
        # The walk starts at the start node, so a loop's back edge is the one that returns to where
        # the loop is entered (its header), whatever order the JSON lists nodes in.
        roots = list(self.nodes)
        if any(node.type == "start" for node in self.nodes.values()):
            roots.insert(0, self.start_node)
        return find_loops(roots, self.outgoing)

    def is_back_edge(self, edge: Edge) -> bool:
        """An edge closing a cycle: it returns to a node the walk from the start node is still inside
        (a retreating edge of the depth-first search), e.g. `m -> h` in `h -> b -> m -> h`.

        Back edges re-activate their target on their own and start a new round of the loop; every
        other edge, inside a loop body too, is forward and takes part in joins. Removing the back
        edges leaves the graph acyclic; in a loop entered at one node (the usual case) they are
        exactly the edges into that node from inside the loop, whichever order the walk takes.
        """
        return edge.index in self._loops.back

    def in_one_loop(self, edge: Edge) -> bool:
        """Both ends of the edge lie on one loop (one strongly connected component)."""
        component = self._loops.component
        return component.get(edge.source, -1) == component.get(edge.target, -2)

    def forward_incoming(self, node_id: str) -> list[Edge]:
        return [edge for edge in self.incoming(node_id) if not self.is_back_edge(edge)]

    def cycle_of(self, node_id: str) -> frozenset[str]:
        """The nodes of the loop `node_id` lies on (its strongly connected component), or none."""
        return self._loops.members.get(node_id, frozenset())

    @cached_property
    def _exits(self) -> dict[int, tuple[str, str | None]]:
        """Forward edges that leave a loop -> (the join input they feed, the header of the loop they
        leave, or None when they leave their component altogether)."""
        loops = self._loops
        exits: dict[int, tuple[str, str | None]] = {}
        for edge in self.edges:
            loop = self.cycle_of(edge.source)
            if not loop or edge.index in loops.back:
                continue
            if edge.target not in loop:
                exits[edge.index] = (loops.slot[edge.source], None)
            else:
                header = loops.outermost_left(edge.source, edge.target)
                if header is not None:  # an inner loop's exit into the body of the loop around it
                    exits[edge.index] = ("loop:" + header, header)
        return exits

    def loop_headers(self) -> frozenset[str]:
        """The nodes loops are entered at (the targets of back edges)."""
        return self._loops.headers

    def in_loop(self, header: str, node_id: str) -> bool:
        """Whether `node_id` lies in the loop entered at `header` (in a loop nested in it too)."""
        return self._loops.contains(header, node_id)

    def is_exit(self, edge: Edge) -> bool:
        """A forward edge leaving a loop (its target is outside a loop its source lies in)."""
        return edge.index in self._exits

    def in_loop_left_by(self, edge: Edge, node_id: str) -> bool:
        """Whether `node_id` lies in the (outermost) loop the exit `edge` leaves."""
        header = self._exits[edge.index][1]
        if header is None:
            return node_id in self.cycle_of(edge.source)
        return self._loops.contains(header, node_id)

    def join_slot(self, edge: Edge) -> str:
        """The join input a forward edge feeds. Edges leaving one loop for the same target share one
        input: the loop is left once, from whichever of its nodes decides to stop."""
        found = self._exits.get(edge.index)
        return found[0] if found else str(edge.index)

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

    @cached_property
    def remaining(self) -> dict[str, int]:
        """Each node's longest remaining path to an end (in nodes, back edges left out), computed once
        per graph in O(V + E): the critical path that orders ready branches (engine/priorities.py)."""
        roots = list(self.nodes)
        if any(node.type == "start" for node in self.nodes.values()):
            roots.insert(0, self.start_node)
        return remaining_lengths(roots, self.outgoing, self._loops.back)

    def critical_first(self, nodes: list[str]) -> list[str]:
        """Ready nodes ordered longest remaining path first; ties keep their order."""
        return nodes if len(nodes) < 2 else by_critical_path(nodes, self.remaining)
