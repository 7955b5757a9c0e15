"""Scheduling decisions: which nodes a finished step activates, joins, dead paths, loop breaking.

Pure functions over a Graph and a small JSON-able state; the runtime applies the decision inside
the transaction that commits the step, with the instance row locked (joins must not race).

Join semantics (dead-path elimination, as in BPMN engines):
- A forward edge (one not closing a cycle) is *resolved* when its source finishes: fired when its
  condition held, not fired otherwise, and also not fired when its source was skipped.
- `join: all` (the default) activates the node once every forward incoming edge is resolved and at
  least one fired; if none fired the node is skipped and its own edges resolve as not fired.
- `join: any` activates the node on the first fired forward edge; the rest of that wave is absorbed.
- A back edge (one returning to where a loop is entered, `Graph.is_back_edge`) activates its target
  by itself whenever it fires, and starts a new round of the loop.
- Inside a loop body edges are forward: a join there waits for the branches of its round and fires
  once per round; its record is per round (`join_record`), so round N+1 starts fresh even when it
  overtakes a late branch of round N. A branch not taken resolves at once (it is skipped for this
  round), unless its node went back to the loop's start or left the loop: the round ended there.
- Loops: the edges leaving one loop for the same target are one join input (`Graph.join_slot`), and
  an exit that did not fire stays open while its node goes round the loop again: only the node that
  stops looping resolves it. (Otherwise a join after `a <-> b` resolves "not fired" on the first
  round and never starts when the loop ends.) The same holds for an inner loop's exits into the body
  of the loop around it.
- A reroute (an operator's review decision) abandons the open work: the joins after the chosen node
  count the abandoned inputs as resolved, not fired (`joins_for_reroute`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workflows.engine.graph import Edge, Graph

# target node -> {"edges": {join slot (an edge index, or "loop:<node>"): fired}, "started": bool,
#                 "next": [later rounds' records, only while rounds overlap]}
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
    work: deque[tuple[str, str, bool, bool]] = deque()  # (target, join slot, fired, from inside its loop)
    resolved: set[tuple[str, str]] = set()

    def resolve(node_id: str, fired_here: dict[int, bool] | None, *, live_round: bool = False) -> None:
        """Resolve the edges leaving a node that finished (`fired_here`) or was skipped (None).

        `live_round`: the node was skipped by a dead branch inside its own loop, while the round
        goes on elsewhere; its exits from the loop stay open like those of a node that goes round."""
        outgoing = graph.outgoing(node_id)
        loop = graph.cycle_of(node_id)
        taken = [e for e in outgoing if fired_here.get(e.index)] if loop and fired_here else []
        slots: dict[tuple[str, str], bool] = {}
        for edge in outgoing:
            did_fire = bool(fired_here and fired_here.get(edge.index))
            if graph.is_back_edge(edge):
                if did_fire:
                    decision.activate.append(edge.target)
                continue
            if not did_fire and loop and stays_open(graph, edge, taken, live_round):
                continue
            key = (edge.target, graph.join_slot(edge))
            slots[key] = slots.get(key, False) or did_fire
        for key, did_fire in slots.items():
            if key not in resolved:  # a join input resolves once per wave
                resolved.add(key)
                work.append((*key, did_fire, key[0] in loop))

    def skip(node_id: str, inside: bool) -> None:
        decision.skipped.append(node_id)
        resolve(node_id, None, live_round=inside)

    resolve(finished, fired)
    while work:
        target, slot, did_fire, inside = work.popleft()
        inputs = graph.join_slots(target)
        if len(inputs) == 1:
            if did_fire:
                decision.activate.append(target)
            else:
                skip(target, inside)
            continue

        # One record per round: the n-th resolution of an input belongs to the n-th round that is
        # still open, so round N+1's branches never count towards round N's join.
        record = join_record(joins, target, slot)
        record["edges"][slot] = did_fire
        join_any = graph.nodes[target].join == "any"
        if join_any and did_fire and not record["started"]:
            record["started"] = True
            decision.activate.append(target)
        complete = len(record["edges"]) == len(inputs)
        if complete:
            close_round(joins, target, record)
            if not any(record["edges"][s] for s in inputs):
                skip(target, inside)
            elif not join_any:
                decision.activate.append(target)

    # A node reached twice in one resolution (two back edges) runs once.
    decision.activate = list(dict.fromkeys(decision.activate))
    return decision


def join_record(joins: JoinState, target: str, slot: str) -> dict[str, Any]:
    """The record of the round an input of `target` resolves for: the oldest open round that has not
    had that input yet (each input resolves once per round), else a new round.

    Rounds overlap only when a loop goes round before every branch of its round resolved (an `any`
    join that started early); the later rounds wait in the first one's "next" list."""
    head = joins.get(target)
    if head is None:
        head = joins[target] = {"edges": {}, "started": False}
        return head
    if slot not in head["edges"]:
        return head
    later: list[dict[str, Any]] = head.setdefault("next", [])
    for record in later:
        if slot not in record["edges"]:
            return record
    later.append({"edges": {}, "started": False})
    return later[-1]


def close_round(joins: JoinState, target: str, record: dict[str, Any]) -> None:
    """Drop a round whose inputs have all resolved; the next open round (if any) becomes the head."""
    head = joins[target]
    later: list[dict[str, Any]] = head.pop("next", [])
    if record is not head:
        later.remove(record)
        rest = head
    elif later:
        rest = later.pop(0)
    else:
        del joins[target]
        return
    joins[target] = rest
    if later:
        rest["next"] = later


def rerun_deciders(graph: Graph, rerun_path: set[str]) -> set[str]:
    """The nodes off `rerun_path` whose last runs decide the join inputs that `joins_for_rerun` counts
    as already resolved: each input's sources, and for a loop's exit every node of that loop."""
    return {node for target in _joins_on(graph, rerun_path)
            for edges in _inputs_off_path(graph, target, rerun_path).values() for node in _deciders(graph, edges)}


def joins_for_rerun(graph: Graph, rerun_path: set[str], joins: JoinState,
                    last: dict[str, set[int] | None]) -> JoinState:
    """Join records for running the nodes of `rerun_path` again (an operator's rerun from a node).

    Records of joins off the path stay as they are. A join on the path starts a fresh round whose
    inputs coming from off the path (none of their edges' sources is on it) count as they resolved
    the last time, keyed by join slot as `advance` keys them (a loop's exits are one input). `last`
    holds, for the nodes `rerun_deciders` names, the edges each one's last run fired (None while it
    had not finished; a node that never ran is absent). An input is fired when one of its edges
    fired, not fired when its sources finished without firing one (for a loop's exit: when the loop
    stopped, no node of it unfinished), and left open otherwise (its cut-short source runs again)."""
    kept = {target: record for target, record in joins.items() if target not in rerun_path}
    for target in _joins_on(graph, rerun_path):
        edges: dict[str, bool] = {}
        for slot, slot_edges in _inputs_off_path(graph, target, rerun_path).items():
            if any(last.get(node, set()) is None for node in _deciders(graph, slot_edges)):
                continue
            ran = [(edge, last[edge.source]) for edge in slot_edges if edge.source in last]
            if ran:
                edges[slot] = any(edge.index in (fired or ()) for edge, fired in ran)
        if edges and len(edges) < len(graph.join_slots(target)):
            kept[target] = {"edges": edges, "started": False}
    return kept


def joins_for_reroute(graph: Graph, goto: str, joins: JoinState,
                      live: set[str]) -> tuple[JoinState, dict[str, list[str]]]:
    """Join records after a reroute to `goto` (an operator's review decision), which cancelled the
    instance's open work: the abandoned branches take no edge (dead-path elimination).

    Records of joins not reachable from `goto` stay as they are. A join reachable from it starts its
    round again: its inputs from the rerouted path (their sources reachable from `goto`, or `goto`
    itself) are open; an input from off that path keeps what it resolved in the current round, stays
    open while `live` (the nodes of the steps the reroute left open: a human task, a running step)
    or a node after them may still resolve it, and otherwise counts as resolved and not fired.
    `goto` itself is started directly: it gets a record only as a join on a loop it lies on.
    Returns the records and, per join, the sources of the inputs counted as not fired."""
    path = graph.reachable_from(goto) | {goto}
    reachable_live = set(live).union(*(graph.reachable_from(node) for node in live))
    kept = {target: record for target, record in joins.items() if target not in path}
    abandoned: dict[str, list[str]] = {}
    for target in _joins_on(graph, path):
        if target == goto and goto not in graph.reachable_from(goto):
            continue
        head = joins.get(target) or {}
        resolved: dict[str, bool] = head.get("edges", {})
        edges: dict[str, bool] = {}
        dropped: list[str] = []
        for slot, slot_edges in _inputs_off_path(graph, target, path).items():
            if slot in resolved:
                edges[slot] = resolved[slot]
            elif not _deciders(graph, slot_edges) & reachable_live:
                edges[slot] = False
                dropped += [edge.source for edge in slot_edges]
        if edges and len(edges) < len(graph.join_slots(target)):
            kept[target] = {"edges": edges, "started": False}
            if dropped:
                abandoned[target] = sorted(set(dropped))
    return kept, abandoned


def _joins_on(graph: Graph, rerun_path: set[str]) -> list[str]:
    """The joins (nodes with two inputs or more) on the path, in the graph's order."""
    return [node for node in graph.nodes if node in rerun_path and len(graph.join_slots(node)) > 1]


def _inputs_off_path(graph: Graph, target: str, rerun_path: set[str]) -> dict[str, list[Edge]]:
    by_slot: dict[str, list[Edge]] = {}
    for edge in graph.forward_incoming(target):
        by_slot.setdefault(graph.join_slot(edge), []).append(edge)
    return {slot: edges for slot, edges in by_slot.items() if all(e.source not in rerun_path for e in edges)}


def _deciders(graph: Graph, edges: list[Edge]) -> set[str]:
    return {node for edge in edges for node in (graph.cycle_of(edge.source) if graph.is_exit(edge) else {edge.source})}


def stays_open(graph: Graph, edge: Edge, taken: list[Edge], skipped_in_round: bool) -> bool:
    """Whether a forward edge its source (on a loop) did not take stays unresolved for now.

    A loop's exit stays open while its source goes round that loop (took an edge staying in it):
    only the node that stops looping resolves it. A branch inside the round resolves at once
    (dead-path elimination within the round), unless the source went back to a loop's start or
    left its loop: then this round ends here, and the branches it did not take are not skipped."""
    if graph.is_exit(edge):
        return skipped_in_round or any(graph.in_loop_left_by(edge, e.target) for e in taken)
    if skipped_in_round:
        return False
    if any(graph.is_back_edge(e) for e in taken):
        return True
    return any(graph.is_exit(e) for e in taken) and not any(
        not graph.is_back_edge(e) and not graph.is_exit(e) for e in taken)


@dataclass(frozen=True)
class LoopCheck:
    allowed: bool
    loop_count: int


def count_activations(loop_count: int, activations: int, max_transitions: int) -> LoopCheck:
    """The loop breaker: every activation counts; past max_transitions nothing more runs."""
    new_count = loop_count + activations
    return LoopCheck(allowed=new_count <= max_transitions, loop_count=new_count)
