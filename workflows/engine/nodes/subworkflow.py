"""A sub-workflow: start another definition's instance with mapped input, wait for it without a
worker, and take its result.

The node runs twice on a worker, briefly each time: first it starts the child (through the
runtime's `Subflows` port, which derives the child's idempotency key from this step) and returns
`waiting_on`, which parks the step (pending, no due time) until the child ends; when the child
completes, the runtime queues the step again and this run finds the child completed and maps its
result. A child that fails, or is cancelled, fails the step (runtime/subflows.py).
"""

from __future__ import annotations

from typing import Any, ClassVar

from workflows.engine import expressions, limits
from workflows.engine.errors import ExpressionError, GraphIssue, PermanentStepError
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes.base import ChildRun, NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register

DEFAULT_MAX_DEPTH = 5


def child_names(child: ChildRun) -> dict[str, Any]:
    """What the `output` mapping's templates see: `child` (its final context as `output` and
    `context`, id, workflow, version, tokens, cost)."""
    return {"child": {"id": child.id, "workflow": child.workflow, "version": child.version,
                      "output": child.context, "context": child.context, "tokens": child.tokens,
                      "cost_usd": child.cost_usd}}


@register
class Subworkflow(NodeKind):
    """Runs another workflow (latest or pinned version) as a child instance and takes its result."""

    name = "subworkflow"
    starts_children = True
    label = "Sub-workflow"
    icon = "▣"  # in DejaVu (Debian chromium's fonts): ⧉ drew an empty box
    color = "#0d9488"
    # `output` is rendered against the child's result when it completes, not against this instance
    # at start; `workflow` is a literal slug: no input can choose which workflow runs (and a
    # self-reference is always seen at save).
    raw_config_keys: ClassVar[frozenset[str]] = frozenset({"output", "workflow"})
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["workflow"],
        "additionalProperties": False,
        "properties": {
            "workflow": {"type": "string", "minLength": 1, "maxLength": 100, "title": "Workflow (slug, literal)"},
            "version": {**limits.number(1, 2_147_483_647, integer=True),
                        "title": "Pinned version (empty: the latest at start)"},
            "input": {"type": "object", "title": "Input (name → value; templates allowed)"},
            "output": {"type": "object",
                       "title": "Output (name → template over child.output; empty: the child's final context)"},
            "save_as": {"type": "string", "minLength": 1, "title": "Save the output in the context as"},
            "max_depth": {**limits.number(1, limits.MAX_SUBWORKFLOW_DEPTH, integer=True),
                          "default": DEFAULT_MAX_DEPTH, "title": "Deepest nesting allowed"},
        },
    }

    def check(self, node: Node, graph: Graph) -> list[GraphIssue]:
        # Its handler starts the child with blocking database work: the ai queue's event loop must not.
        if node.queue == "ai":
            return [GraphIssue(f"node '{node.id}': a sub-workflow runs on the default or io queue, not ai",
                               node=node.id, field="queue")]
        return []

    def run(self, call: StepCall) -> NodeResult:
        if call.subflows is None:
            raise PermanentStepError("a sub-workflow runs only on a worker (no way to start its child)")
        config = call.config
        max_depth = int(config.get("max_depth", DEFAULT_MAX_DEPTH))
        depth = call.subflows.depth + 1
        if depth > max_depth:
            raise PermanentStepError(
                f"node '{call.node.id}': starting '{config['workflow']}' would nest sub-workflows {depth} "
                f"levels deep, past max_depth {max_depth}", details={"depth": depth, "max_depth": max_depth})
        start_input = config.get("input") or {}
        if not isinstance(start_input, dict):
            raise PermanentStepError(f"node '{call.node.id}': input must render to an object")
        version = config.get("version")
        child = call.subflows.child(str(config["workflow"]), int(version) if version else None, start_input)
        if child.status != "completed":
            # Active (the runtime fails the step itself when a child fails or is cancelled).
            return NodeResult(waiting_on=child.id)
        output: Any = child.context
        if config.get("output"):
            try:
                output = expressions.render(config["output"], child_names(child))
            except ExpressionError as exc:
                raise PermanentStepError(f"node '{call.node.id}': output mapping failed: {exc}") from None
        updates = {str(config["save_as"]): output} if config.get("save_as") else {}
        # The child's spending counts toward this instance's totals and budget (README).
        usage = {"tokens": child.tokens, "cost_usd": child.cost_usd, "model": f"subworkflow:{child.workflow}",
                 "child": child.id}
        return NodeResult(output=output, context_updates=updates, usage=usage)
