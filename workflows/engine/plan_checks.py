"""A planner's own restrictions on the plan its model wrote, over every place a plan can run something.

The objective is rendered from instance data (a webhook sender, an operator, a `run` token), so the
plan is as untrusted as the model's reply. Before a plan is recorded (where it also gets the full
validation of a saved graph, workflows/credentials.validate), a planner node checks:

- no node, llm tool target or `compensate` spec of an excluded kind (planner, subworkflow: more work
  the designer never saw), and a compensation only of a kind that may compensate (a compensation runs
  automatically when the plan fails);
- with `allowed_functions`, every python node, python tool target and compensation calls one of them;
- no `{{ secrets.NAME }}` reference and no provider `credential` unless the planner node lists the
  name in `allowed_credentials` (a plan could otherwise send any stored secret where it likes).

Plain Python: each problem is a GraphIssue naming the plan's node and field.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from workflows.engine import secrets
from workflows.engine.compensation_checks import COMPENSATION_KINDS, spec_as_node
from workflows.engine.errors import GraphIssue
from workflows.engine.planner import EXCLUDED_KINDS


def _runnables(node: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any], str]]:
    """(what, kind, config, field) of everything a plan's node runs: itself, each tool target, its
    compensation."""
    config = node.get("config") if isinstance(node.get("config"), Mapping) else {}
    assert isinstance(config, Mapping)
    yield "", str(node.get("type")), config, "config"
    tools = config.get("tools") if node.get("type") == "llm" else None
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        target = tool.get("target") if isinstance(tool, Mapping) else None
        if not isinstance(target, Mapping):
            continue
        name = tool.get("name") if isinstance(tool, Mapping) else i
        target_config: Mapping[str, Any] = {}
        if target.get("type") == "python":
            target_config = {"function": target.get("function")}
        elif isinstance(target.get("config"), Mapping):
            target_config = target["config"]
        yield f"tool '{name}' ", str(target.get("type")), target_config, f"config.tools.{i}.target"
    found = spec_as_node(str(node.get("id")), node.get("compensate"))
    if found is not None:
        kind, comp_config = found
        yield "compensation ", kind, comp_config, "compensate"


def plan_issues(plan: Mapping[str, Any], allowed_functions: Collection[str] | None,
                allowed_credentials: Collection[str]) -> list[GraphIssue]:
    """What the planner's restrictions refuse in `plan` (empty: nothing)."""
    issues: list[GraphIssue] = []
    nodes = plan.get("nodes")
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, Mapping):
            continue
        node_id = str(node.get("id"))

        def refuse(message: str, field: str, node_id: str = node_id) -> None:
            issues.append(GraphIssue(f"node '{node_id}' {message}", node=node_id, field=field))

        for what, kind, config, field in _runnables(node):
            if kind in EXCLUDED_KINDS or (what == "compensation " and kind not in COMPENSATION_KINDS):
                refuse(f"{what}may not be a '{kind}' node in a plan" if what == "compensation "
                       else f"{what}may not be a {kind} node", f"{field}.type" if what else "type")
                continue
            function = config.get("function")
            if kind == "python" and allowed_functions is not None and function not in allowed_functions:
                refuse(f"{what}calls '{function}', not one of the allowed functions "
                       f"({', '.join(allowed_functions)})", field if what == "compensation " else f"{field}.function")
            provider = config.get("credential")
            if kind in ("llm", "planner") and provider is not None and provider not in allowed_credentials:
                refuse(f"{what}uses the provider credential '{provider}', which the planner does not list "
                       "in allowed_credentials", f"{field}.credential")
        for name in sorted(secrets.references(node)):
            if name not in allowed_credentials:
                refuse(f"references {{{{ secrets.{name} }}}}, but the planner does not list '{name}' in "
                       "allowed_credentials", "config")
    return issues
