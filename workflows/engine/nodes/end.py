from __future__ import annotations

from workflows.engine.nodes.base import NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register


@register
class End(NodeKind):
    """Reaching an end node completes the instance once no other step is open."""

    name = "end"
    structural = True
    label = "End"
    icon = "■"
    color = "#0f172a"
    config_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"status": {"type": "string", "enum": ["completed"], "default": "completed"}},
    }

    def run(self, call: StepCall) -> NodeResult:
        return NodeResult(output=None)
