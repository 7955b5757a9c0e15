"""What a worker holds while it runs a step, and what a handler's attempt came to."""

from __future__ import annotations

import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from workflows.engine.errors import StepError
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes import NodeKind, NodeResult, StepCall
from workflows.models import StepRun, WorkflowInstance

TRACEBACK_CHARS = 4000


@dataclass(frozen=True)
class ParentLink:
    """What a child instance records of the step that started it (runtime/subflows.py)."""

    step_id: int
    depth: int


@dataclass
class Claim:
    """A step this worker holds under a lease token, with the instance as the claim (or the
    previous commit of an inline chain) left it."""

    step: StepRun
    instance: WorkflowInstance
    graph: Graph
    node: Node
    kind: NodeKind
    token: str
    worker: str
    call: StepCall | None = None
    # True when `instance` is the instance as this worker's own last commit left it (the claim, or
    # the commit that created this inline step): a store may write the outcome against it without
    # taking the lock first, guarded by its event seq.
    fresh: bool = False


@dataclass
class Outcome:
    result: NodeResult | None = None
    error: StepError | None = None


def as_step_error(exc: BaseException) -> StepError:
    """A handler's exception as the step's error. Unexpected exceptions are transient (the node's
    retry policy decides); the end of the traceback is kept for the step inspector."""
    if isinstance(exc, StepError):
        return exc
    trace = "".join(traceback.format_exception(exc))[-TRACEBACK_CHARS:]
    return StepError(f"{type(exc).__name__}: {exc}", details={"exception": type(exc).__name__, "traceback": trace})


class StepOutputs(Mapping[str, Any]):
    """`steps.<node>` in templates and conditions: the latest succeeded run of each node, read lazily."""

    def __init__(self, instance_id: int) -> None:
        self.instance_id = instance_id
        self._cache: dict[str, Any] = {}
        self._succeeded: frozenset[str] | None = None

    def __contains__(self, node_id: object) -> bool:
        """`'x' in steps`: answered from the set of succeeded nodes, read once (one query for every
        membership test of this evaluation), without loading any output."""
        if node_id in self._cache:
            return True
        return node_id in self._names()

    def _names(self) -> frozenset[str]:
        if self._succeeded is None:
            from workflows.store import get_store

            self._succeeded = frozenset(get_store().succeeded_nodes(self.instance_id))
        return self._succeeded

    def __getitem__(self, node_id: str) -> Any:
        if node_id not in self._cache:
            from workflows.store import get_store

            row = get_store().latest_output(self.instance_id, node_id)
            if row is None:
                raise KeyError(node_id)
            self._cache[node_id] = row
        return self._cache[node_id]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names()))

    def __len__(self) -> int:
        return len(self._names())
