from __future__ import annotations

from typing import Any, ClassVar

from workflows.engine.errors import ConfigError, GraphIssue
from workflows.engine.functions import FunctionCall, FunctionResult, function_names, get_function
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes.base import NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register


@register
class Python(NodeKind):
    """Calls a Python function registered in code (never code typed in the browser)."""

    name = "python"
    label = "Python function"
    icon = "λ"
    color = "#2563eb"
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["function"],
        "additionalProperties": False,
        "properties": {
            "function": {"type": "string", "minLength": 1, "title": "Registered function"},
            "args": {"type": "object", "title": "Arguments (JSON; templates allowed)"},
        },
    }

    def check(self, node: Node, graph: Graph) -> list[GraphIssue]:
        name = node.config.get("function")
        if isinstance(name, str) and get_function(name) is None:
            known = ", ".join(function_names()) or "none"
            return [GraphIssue(f"node '{node.id}': function '{name}' is not registered (known: {known})",
                               node=node.id, field="config.function")]
        return []

    def run(self, call: StepCall) -> NodeResult:
        name = call.config["function"]
        fn = get_function(name)
        if fn is None:
            raise ConfigError(f"function '{name}' is not registered")
        result = fn(FunctionCall(
            args=dict(call.config.get("args") or {}),
            context=call.context,
            steps=call.steps,
            start_input=call.start_input,
            idempotency_key=call.idempotency_key,
            instance_id=call.instance_id,
            node_id=call.node.id,
            visit=call.visit,
            attempt=call.attempt,
        ))
        if isinstance(result, FunctionResult):
            return NodeResult(output=result.output, context_updates=result.context)
        return NodeResult(output=result)
