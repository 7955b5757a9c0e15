"""Priorities: an instance's (set when it starts) and a node's (graph field `priority`), and the
critical path that orders the ready branches of one instance.

A step runs at its node's priority when the node sets one, else at its instance's. Each priority of a
kind has its own RQ queue (`default:high`, `default`, `default:low`); workers take from them in
that order, and every FAIR_EVERY-th dequeue from the lowest non-empty one first, so low work waits
behind a bounded number of others and is never starved (workflows/workers/sync.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

HIGH, NORMAL, LOW = "high", "normal", "low"
PRIORITIES = (HIGH, NORMAL, LOW)  # highest first: the order workers listen in


class PriorityInvalid(ValueError):
    """A priority that is not one of PRIORITIES; `field` names where it came from."""

    def __init__(self, field: str, value: object) -> None:
        super().__init__(f"{field}: must be one of {', '.join(PRIORITIES)} (got {value!r})")
        self.field = field


def parse_priority(value: object, field: str = "priority") -> str:
    """The priority a request asked for (absent or null: normal); raises PriorityInvalid."""
    if value is None:
        return NORMAL
    if isinstance(value, str) and value in PRIORITIES:
        return value
    raise PriorityInvalid(field, value)


def queue_name(kind: str, priority: str) -> str:
    """The RQ queue of a kind's steps at a priority: normal keeps the kind's own name."""
    return kind if priority == NORMAL else f"{kind}:{priority}"


def queue_names(kind: str) -> list[str]:
    """Every queue of a kind, highest priority first."""
    return [queue_name(kind, priority) for priority in PRIORITIES]


def kind_of(queue: str) -> str:
    """The kind (ai, io, default) of a priority queue's name."""
    return queue.split(":", 1)[0]


def priority_of(queue: str) -> str:
    """The priority a queue's name carries."""
    suffix = queue.split(":", 1)[1] if ":" in queue else NORMAL
    return suffix if suffix in PRIORITIES else NORMAL


def fair_order(queues: list[str], dequeues: int, every: int) -> list[str]:
    """The order a worker takes from `queues` at its `dequeues`-th dequeue (counted from 0): highest
    priority first (kinds keep their order within a priority), but every `every`-th turn lowest
    first, so a low job waits at most `every` dequeues of one worker however much higher work keeps
    arriving. `every` 0: strict priority."""
    low_first = every > 0 and dequeues % every == every - 1
    sign = -1 if low_first else 1
    return sorted(queues, key=lambda queue: sign * PRIORITIES.index(priority_of(queue)))


class HasTarget(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def target(self) -> str: ...


def remaining_lengths(nodes: Iterable[str], outgoing: Callable[[str], Iterable[HasTarget]],
                      back: frozenset[int]) -> dict[str, int]:
    """Each node's longest path (in nodes, itself included) to a node with no way on, over the
    forward edges: the back edges of loops are left out, which leaves the graph acyclic, so a loop
    counts once. O(V + E): a depth-first walk computes each node after all its successors."""
    lengths: dict[str, int] = {}
    for root in nodes:
        if root in lengths:
            continue
        # Iterative post-order walk (no recursion limit on long chains).
        stack: list[tuple[str, list[str]]] = [(root, _forward(root, outgoing, back))]
        on_stack = {root}
        while stack:
            node, todo = stack[-1]
            while todo and (todo[-1] in lengths or todo[-1] in on_stack):
                todo.pop()  # computed already (on_stack cannot happen without back edges)
            if todo:
                child = todo.pop()
                stack.append((child, _forward(child, outgoing, back)))
                on_stack.add(child)
                continue
            stack.pop()
            on_stack.discard(node)
            lengths[node] = 1 + max((lengths.get(t, 0) for t in _forward(node, outgoing, back)), default=0)
    return lengths


def _forward(node: str, outgoing: Callable[[str], Iterable[HasTarget]], back: frozenset[int]) -> list[str]:
    return [edge.target for edge in outgoing(node) if edge.index not in back]


def by_critical_path(nodes: list[str], lengths: dict[str, int]) -> list[str]:
    """The ready nodes, longest remaining path first (stable: ties keep the graph's order)."""
    return sorted(nodes, key=lambda node: -lengths.get(node, 0))
