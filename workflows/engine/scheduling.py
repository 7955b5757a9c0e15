"""Scheduling decisions: which nodes a finished step activates, joins, dead paths, loop breaking.

Pure functions over a Graph and a small JSON-able state; the executor applies the decision inside
the transaction that commits the step, with the instance row locked (joins must not race).

Join semantics (dead-path elimination, as in BPMN engines):
- A forward edge (one not closing a cycle) is *resolved* when its source finishes: fired when its
  condition held, not fired otherwise, and also not fired when its source was skipped.
- `join: all` (the default) activates the node once every forward incoming edge is resolved and at
  least one fired; if none fired the node is skipped and its own edges resolve as not fired.
- `join: any` activates the node on the first fired forward edge; the rest of that wave is absorbed.
- A back edge (closing a cycle) activates its target by itself whenever it fires.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.graph import Edge, Graph

JoinState = dict[str, dict[str, Any]]  # target node -> {"edges": {edge index: fired}, "started": bool}


@dataclass
class Decision:
    activate: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    fired_edges: list[int] = field(default_factory=list)


def edges_fired(graph: Graph, node_id: str, holds: Callable[[Edge], bool]) -> dict[int, bool]:
    """Evaluate each outgoing edge of a finished node: unconditional edges always fire."""
    return {edge.index: (edge.when is None or bool(holds(edge))) for edge in graph.outgoing(node_id)}


def advance(graph: Graph, joins: JoinState, finished: str, fired: dict[int, bool]) -> Decision:
    """Resolve the outgoing edges of `finished`; mutates `joins` (the caller persists it)."""
    decision = Decision(fired_edges=[index for index, ok in fired.items() if ok])
    work: deque[tuple[Edge, bool]] = deque((edge, fired[edge.index]) for edge in graph.outgoing(finished))

    def skip(node_id: str) -> None:
        decision.skipped.append(node_id)
        for edge in graph.outgoing(node_id):
            if not graph.is_back_edge(edge):
                work.append((edge, False))

    while work:
        edge, did_fire = work.popleft()
        target = edge.target
        if graph.is_back_edge(edge):
            if did_fire:
                decision.activate.append(target)
            continue
        forward = graph.forward_incoming(target)
        if len(forward) == 1:
            if did_fire:
                decision.activate.append(target)
            else:
                skip(target)
            continue

        record = joins.setdefault(target, {"edges": {}, "started": False})
        record["edges"][str(edge.index)] = did_fire
        join_any = graph.nodes[target].join == "any"
        if join_any and did_fire and not record["started"]:
            record["started"] = True
            decision.activate.append(target)
        if all(str(e.index) in record["edges"] for e in forward):
            any_fired = any(record["edges"][str(e.index)] for e in forward)
            del joins[target]
            if not any_fired:
                skip(target)
            elif not join_any:
                decision.activate.append(target)

    # A node reached twice in one resolution (two back edges) runs once.
    decision.activate = list(dict.fromkeys(decision.activate))
    return decision


@dataclass(frozen=True)
class LoopCheck:
    allowed: bool
    loop_count: int


def count_activations(loop_count: int, activations: int, max_transitions: int) -> LoopCheck:
    """The loop breaker: every activation counts; past max_transitions nothing more runs."""
    new_count = loop_count + activations
    return LoopCheck(allowed=new_count <= max_transitions, loop_count=new_count)
