"""How many node activations a run of a graph takes: the loop breaker's default limit and its floor.

The loop breaker (`max_transitions`, scheduling.count_activations) counts every node activation, the
start's included, and for an llm node with tools each round (its next attempt) and each tool call.
It is there to stop loops (a model routing an instance in circles), not long straight workflows. So:

- A graph that sets no `max_transitions` gets `max(STEADYFLOW_MAX_TRANSITIONS, one pass)`. One pass
  activates every node once, plus for each tool-using llm node `max_tool_rounds` rounds of one attempt
  and one call of each declared tool (a model may ask for more calls in a round than it has tools, so
  this is a generous estimate of an agent's work, not a bound) and each planner node's `max_nodes`
  (its plan runs as a child given no more transitions than this instance has left, so one pass of
  the largest plan it may run must fit). In an acyclic graph no
  node is activated twice (a join activates its node once), so a first run never halts however long
  the chain or wide the fan-out; a loop still halts, after at least one pass's worth. Compensations
  do not count (they are not graph nodes and the loop breaker never counts them), nor does a
  sub-workflow's child (it counts against its own graph's limit).
- A `max_transitions` a graph sets is taken as it is, but one below the activations of the shortest
  path from the start to an end node is refused at validation: a run completes only by reaching an
  end node, and reaching one activates every node of some path to it, so every run would halt (or
  fail). The shortest path is a lower bound, so nothing runnable is refused: parallel branches and
  loops add activations, and a limit they exceed is the designer's choice.

Both are one walk over the graph, O(V + E).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from workflows.engine.graph import Graph
from workflows.engine.nodes.llm_tools import max_rounds
from workflows.engine.nodes.planner import DEFAULT_PLAN_NODES

SHOWN_PATH_NODES = 12  # a refusal names this many nodes of the path at most


def one_pass(graph: Graph) -> int:
    """The activations of a run that activates every node once (tool rounds and plans included)."""
    total = 0
    for node in graph.nodes.values():
        total += 1
        tools = node.config.get("tools") if node.type == "llm" else None
        if tools:
            total += max_rounds(node.config) * (1 + len(tools))
        elif node.type == "planner":
            total += int(node.config.get("max_nodes") or DEFAULT_PLAN_NODES)
    return total


def default_max_transitions(graph: Graph, floor: int) -> int:
    """The limit of a graph that sets no max_transitions: the configured default (`floor`,
    STEADYFLOW_MAX_TRANSITIONS), or one pass over every node when that is more."""
    return max(floor, one_pass(graph))


def max_transitions(graph: Graph, floor: int) -> int:
    """The instance's limit: the graph's own `max_transitions`, else default_max_transitions. Also what
    a loop-breaker approval without a grant adds again."""
    own = graph.settings.max_transitions
    return int(own) if own else default_max_transitions(graph, floor)


def shortest_run(start: str, is_end: Callable[[str], bool],
                 successors: Callable[[str], Iterable[str]]) -> list[str] | None:
    """The shortest path (fewest nodes) from `start` to an end node, both included; None when no end
    node is reachable. Breadth-first: each node and edge is looked at once."""
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        if is_end(current):
            path: list[str] = []
            at: str | None = current
            while at is not None:
                path.append(at)
                at = parent[at]
            return path[::-1]
        for target in successors(current):
            if target not in parent:
                parent[target] = current
                queue.append(target)
    return None


def too_few_message(value: int, path: list[str]) -> str:
    """Why a max_transitions below the shortest run is refused, with the numbers and the path."""
    shown = path if len(path) <= SHOWN_PATH_NODES else [*path[:SHOWN_PATH_NODES - 2], "…", path[-1]]
    return (f"settings.max_transitions: {value} is less than the {len(path)} node activations of the "
            f"shortest path from the start to an end node ({' -> '.join(shown)}), so every run would halt; "
            f"set at least {len(path)}, or leave it out (the default covers one pass over every node)")
