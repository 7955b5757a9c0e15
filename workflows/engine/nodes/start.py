from __future__ import annotations

from workflows.engine.nodes.base import NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register


@register
class Start(NodeKind):
    """Where an instance begins; its output is the start input."""

    name = "start"
    structural = True
    label = "Start"
    icon = "▶"
    color = "#16a34a"
    config_schema = {"type": "object", "additionalProperties": False, "properties": {}}

    def run(self, call: StepCall) -> NodeResult:
        return NodeResult(output=call.start_input)
