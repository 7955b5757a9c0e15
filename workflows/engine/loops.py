"""A graph's loops from one depth-first walk: strongly connected components (Tarjan), back edges,
and how loops nest (each node's innermost loop header, after Wei, Mao, Zou and Chen, "A New
Algorithm for Identifying Loops in Decompilation", SAS 2007).

A loop is entered at its *header*, the target of its back edges; a loop nested in another (an
agent's tool loop inside a planning loop) has its own header, and a node's headers from the
innermost outwards name the loops it lies in. Scheduling needs the nesting to tell, inside an
outer loop's body, an edge that leaves an inner loop (decided when the inner loop stops) from a
branch of the round (decided at once).

Work is O(V + E) for the walk plus, per loop found, a walk up the chain of headers it nests in:
linear for graphs whose loops nest a bounded depth (every example: two at most).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol


class HasTarget(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def target(self) -> str: ...


@dataclass(frozen=True)
class Loops:
    """The graph's loops, from one pass over it; memory linear in its size (one frozenset per
    strongly connected component, shared by its nodes)."""

    component: dict[str, int]             # node -> its strongly connected component's number
    back: frozenset[int]                  # the indexes of the back edges (retreating edges of the walk)
    members: dict[str, frozenset[str]]    # node on a loop -> the nodes of its component
    slot: dict[str, str]                  # node on a loop -> the join input its exits feed ("loop:<min>")
    header: dict[str, str]                # node in a loop -> the header of the innermost loop around it
    headers: frozenset[str]               # the targets of back edges

    def innermost(self, node_id: str) -> str | None:
        """The header of the innermost loop `node_id` lies in (itself when it is a header)."""
        return node_id if node_id in self.headers else self.header.get(node_id)

    def contains(self, loop: str, node_id: str) -> bool:
        """Whether `node_id` lies in the loop headed by `loop` (nested loops included)."""
        current = self.innermost(node_id)
        while current is not None:
            if current == loop:
                return True
            current = self.header.get(current)
        return False

    def outermost_left(self, source: str, target: str) -> str | None:
        """The header of the outermost loop an edge source -> target leaves (one that holds the source
        and not the target), or None when the target is in every loop the source is in."""
        left = None
        current = self.innermost(source)
        while current is not None and not self.contains(current, target):
            left = current
            current = self.header.get(current)
        return left


def find_loops(roots: Iterable[str], outgoing: Callable[[str], Sequence[HasTarget]]) -> Loops:
    """Tarjan's strongly connected components, iterative (a 1,000-node chain must not recurse 1,000
    deep), O(V + E): each node is entered once and each of its edges looked at once. The same walk
    finds the back edges (those to a node still on its path) and tags each node with its innermost
    loop header (Wei et al.).

    A component is a loop when it has two nodes or more, or one node with an edge to itself.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    depth: dict[str, int] = {}  # position on the walk's path (1 = root), 0 once closed
    back: set[int] = set()
    header: dict[str, str] = {}
    headers: set[str] = set()
    component: dict[str, int] = {}
    members: dict[str, frozenset[str]] = {}
    slot: dict[str, str] = {}
    numbered = 0  # components closed so far

    def tag(node_id: str, loop: str | None) -> None:
        """`node_id` lies in the loop headed by `loop`: weave `loop` into its chain of headers, which
        stays ordered by depth on the path (innermost = deepest)."""
        if loop is None or node_id == loop:
            return
        current, candidate = node_id, loop
        while current in header:
            known = header[current]
            if known == candidate:
                return
            if depth[known] < depth[candidate]:
                header[current] = candidate
                current, candidate = candidate, known
            else:
                current = known
        header[current] = candidate

    def enter(node_id: str, at: int) -> tuple[str, Iterator[HasTarget]]:
        index[node_id] = low[node_id] = len(index)
        stack.append(node_id)
        on_stack.add(node_id)
        depth[node_id] = at
        return node_id, iter(outgoing(node_id))

    for root in roots:
        if root in index:
            continue
        work = [enter(root, 1)]
        while work:
            node_id, edges = work[-1]
            for edge in edges:
                target = edge.target
                if target not in index:
                    work.append(enter(target, len(work) + 1))
                    break
                if target in on_stack:
                    low[node_id] = min(low[node_id], index[target])
                if depth[target] > 0:
                    # Back to a node on the path: it heads a loop this node lies in.
                    back.add(edge.index)
                    headers.add(target)
                    tag(node_id, target)
                elif target in header:
                    # Into a loop entered before: this node lies in the enclosing loops still open.
                    loop: str | None = header[target]
                    while loop is not None and depth[loop] == 0:
                        loop = header.get(loop)  # entered at another node (irreducible): go outwards
                    tag(node_id, loop)
            else:
                # Every edge of node_id looked at: close it.
                work.pop()
                depth[node_id] = 0
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node_id])
                    tag(parent, header.get(node_id))
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
                        loop_nodes = frozenset(found)
                        name = "loop:" + min(loop_nodes)
                        for member in found:
                            members[member] = loop_nodes
                            slot[member] = name
    # A loop entered at several nodes (irreducible: a router into either node of a <-> b): every edge
    # from inside the loop into one of its entries is a back edge too, so an entry never waits, in
    # a later round, for the edge from outside that started it once.
    entries = {edge.target for node_id in index for edge in outgoing(node_id)
               if edge.target in members and component[edge.target] != component[node_id]}
    back.update(edge.index for node_id in members for edge in outgoing(node_id)
                if edge.target in entries and component[edge.target] == component[node_id])
    return Loops(component=component, back=frozenset(back), members=members, slot=slot, header=header,
                 headers=frozenset(headers))
