from __future__ import annotations

from typing import Any, ClassVar

from workflows.engine.errors import GraphIssue, PermanentStepError
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes.base import NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register
from workflows.engine.schema_checks import human_inputs_issues


@register
class Human(NodeKind):
    """Waits for an operator's input or approval (the review queue). The answer is the output."""

    name = "human"
    awaits_person = True
    label = "Human task"
    icon = "☺"
    color = "#ea580c"
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["prompt"],
        "additionalProperties": False,
        "properties": {
            "prompt": {"type": "string", "title": "What the operator is asked", "format": "textarea"},
            "assignee_group": {"type": "string", "default": "operators", "title": "Group that answers"},
            "inputs": {
                "type": "object",
                "title": "Declared inputs (name → JSON Schema)",
                "additionalProperties": {"type": "object"},
            },
        },
    }

    def check(self, node: Node, graph: Graph) -> list[GraphIssue]:
        # Each declared input is a JSON Schema the review form and the approval validate against.
        return human_inputs_issues(node.id, node.config)

    def run(self, call: StepCall) -> NodeResult:
        # Never reached: activation parks the step and opens a review item; the answer completes it.
        raise PermanentStepError("a human task is answered in the review queue, not run by a worker")
