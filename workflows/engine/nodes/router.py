from __future__ import annotations

from typing import Any, ClassVar

from workflows.engine import expressions
from workflows.engine.errors import ExpressionError, GraphIssue, PermanentStepError
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes.base import NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register


@register
class Router(NodeKind):
    """A condition switch: the first rule whose `when` holds names the route; else `default`.

    Its output is {"route": name}; outgoing edges test `route == 'name'`.
    """

    name = "router"
    label = "Router"
    icon = "◇"
    color = "#9333ea"
    raw_config_keys = frozenset({"rules"})
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["rules"],
        "additionalProperties": False,
        "properties": {
            "rules": {
                "type": "array",
                "title": "Rules (first match wins)",
                "items": {
                    "type": "object",
                    "required": ["when", "route"],
                    "additionalProperties": False,
                    "properties": {"when": {"type": "string", "minLength": 1}, "route": {"type": "string"}},
                },
            },
            "default": {"type": "string", "title": "Route when no rule holds"},
        },
    }

    def check(self, node: Node, graph: Graph) -> list[GraphIssue]:
        issues = []
        for i, rule in enumerate(node.config.get("rules", [])):
            try:
                expressions.parse(rule.get("when", ""))
            except ExpressionError as exc:
                issues.append(GraphIssue(f"node '{node.id}': rule {i + 1} condition {exc}",
                                         node=node.id, field=f"config.rules.{i}.when"))
        return issues

    def run(self, call: StepCall) -> NodeResult:
        names = expressions.condition_names(call.context, call.context, call.steps, call.start_input)
        for rule in call.config.get("rules", []):
            try:
                if expressions.evaluate(rule["when"], names):
                    return NodeResult(output={"route": rule["route"]})
            except ExpressionError as exc:
                raise PermanentStepError(f"rule condition failed: {exc}") from None
        default = call.config.get("default")
        if default is None:
            raise PermanentStepError("no rule matched and the router has no default route")
        return NodeResult(output={"route": default})
