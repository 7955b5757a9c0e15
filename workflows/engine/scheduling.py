"""Scheduling decisions: which nodes a finished step activates, joins, dead paths, loop breaking.

Pure functions over a Graph and a small JSON-able state; the runtime applies the decision inside
the transaction that commits the step, with the instance row locked (joins must not race).

Join semantics (dead-path elimination, as in BPMN engines):
- A forward edge (one not closing a cycle) is *resolved* when its source finishes: fired when its
  condition held, not fired otherwise, and also not fired when its source was skipped.
- `join: all` (the default) activates the node once every forward incoming edge is resolved and at
  least one fired; if none fired the node is skipped and its own edges resolve as not fired.
- `join: any` activates the node on the first fired forward edge; the rest of that wave is absorbed.
- A back edge (closing a cycle) activates its target by itself whenever it fires.
- Loops: the edges leaving one loop for the same target are one join input (`Graph.join_slot`), and
  an exit that did not fire stays open while its node goes round the loop again: only the node that
  stops looping resolves it. (Otherwise a join after `a <-> b` resolves "not fired" on the first
  round and never starts when the loop ends.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.graph import Edge, Graph

# target node -> {"edges": {join slot (an edge index, or "loop:<node>"): fired}, "started": bool}
JoinState = dict[str, dict[str, Any]]


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
    work: deque[tuple[str, str, bool]] = deque()  # (target, join slot, fired)
    resolved: set[tuple[str, str]] = set()

    def resolve(node_id: str, fired_here: dict[int, bool] | None) -> None:
        """Resolve the edges leaving a node that finished (`fired_here`) or was skipped (None)."""
        loop = graph.cycle_of(node_id)
        outgoing = graph.outgoing(node_id)
        goes_round = fired_here is not None and any(fired_here.get(e.index) for e in outgoing if e.target in loop)
        slots: dict[tuple[str, str], bool] = {}
        for edge in outgoing:
            did_fire = bool(fired_here and fired_here.get(edge.index))
            if graph.is_back_edge(edge):
                if did_fire:
                    decision.activate.append(edge.target)
                continue
            if goes_round and not did_fire:
                continue  # a loop exit not taken this round: the next round decides it
            key = (edge.target, graph.join_slot(edge))
            slots[key] = slots.get(key, False) or did_fire
        for key, did_fire in slots.items():
            if key not in resolved:  # a join input resolves once per wave
                resolved.add(key)
                work.append((*key, did_fire))

    def skip(node_id: str) -> None:
        decision.skipped.append(node_id)
        resolve(node_id, None)

    resolve(finished, fired)
    while work:
        target, slot, did_fire = work.popleft()
        inputs = graph.join_slots(target)
        if len(inputs) == 1:
            if did_fire:
                decision.activate.append(target)
            else:
                skip(target)
            continue

        record = joins.setdefault(target, {"edges": {}, "started": False})
        record["edges"][slot] = bool(record["edges"].get(slot)) or did_fire
        join_any = graph.nodes[target].join == "any"
        if join_any and did_fire and not record["started"]:
            record["started"] = True
            decision.activate.append(target)
        if all(s in record["edges"] for s in inputs):
            any_fired = any(record["edges"][s] for s in inputs)
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
