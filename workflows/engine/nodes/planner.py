"""A planner: ask an LLM for a sub-graph that meets an objective, then run it as a sub-workflow.

At run time the step builds the planning prompt (workflows/engine/planner.py) from its rendered
`objective`, the node kinds and the registered functions (its `allowed_functions` only, when given),
calls the provider an llm node would (or `scripted`), reads the reply strictly, bounds the plan by
the parent (no more budget, tokens or transitions than the parent has left) and records it through
the runtime's `Subflows` port: validated with credential names and saved as a version of the hidden
definition `<parent-slug>--plan-<node>`. The child starts on that version as a subworkflow's does
(same idempotency key, parked without a worker, settled when the child ends).

A step that runs again (a replayed job, a retry after its child failed) finds the recorded plan and
makes no second LLM call; a replay finds its child too and never starts a second one.
"""

from __future__ import annotations

from typing import Any, ClassVar

from workflows.engine import limits, outbound, plan_checks, planner, providers
from workflows.engine.errors import ConfigError, GraphIssue, PermanentStepError
from workflows.engine.functions import describe_functions
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes.base import NodeKind, NodeResult, RecordedPlan, StepCall
from workflows.engine.nodes.registry import known_kinds, register
from workflows.engine.nodes.subworkflow import DEFAULT_MAX_DEPTH

MAX_PLAN_NODES = 50
DEFAULT_PLAN_NODES = 20
DEFAULT_MODEL = "gpt-4o-mini"


@register
class Planner(NodeKind):
    """Plans a sub-graph with an LLM at run time and runs it as a child instance."""

    name = "planner"
    starts_children = True
    label = "Planner"
    icon = "✧"
    color = "#7c3aed"
    raw_config_keys: ClassVar[frozenset[str]] = frozenset({"script", "credential", "allowed_functions",
                                                           "allowed_credentials"})
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["objective"],
        "additionalProperties": False,
        "properties": {
            "objective": {"type": "string", "minLength": 1, "title": "Objective (templates allowed)",
                          "format": "textarea"},
            "provider": {"type": "string", "enum": ["openai", "scripted"], "title": "Provider"},
            "credential": {"type": "string", "minLength": 1, "maxLength": 64,
                           "title": "Provider credential (empty: the environment's provider)"},
            "model": {"type": "string", "title": "Model", "default": DEFAULT_MODEL},
            "max_nodes": {**limits.number(3, MAX_PLAN_NODES, integer=True), "default": DEFAULT_PLAN_NODES,
                          "title": "Largest plan (nodes)"},
            "allowed_functions": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True,
                                  "maxItems": 200, "title": "Functions the plan may call (empty: any registered)"},
            # Credentials the plan may use ({{ secrets.NAME }}, an llm node's provider); none if empty.
            "allowed_credentials": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 64},
                                    "uniqueItems": True, "maxItems": 50,
                                    "title": "Credentials the plan may use (empty: none)"},
            "input": {"type": "object", "title": "The plan's start input (name → value; templates allowed)"},
            "save_as": {"type": "string", "minLength": 1, "title": "Save the plan's result in the context as"},
            "max_depth": {**limits.number(1, limits.MAX_SUBWORKFLOW_DEPTH, integer=True),
                          "default": DEFAULT_MAX_DEPTH, "title": "Deepest nesting allowed"},
            "script": {"type": "array", "title": "Scripted replies (the first's text is the plan's JSON)",
                       "items": {"type": "object", "additionalProperties": False,
                                 "properties": {"text": {"type": "string"}, "usage": {"type": "object"},
                                                "error": {"type": "string"}, "permanent": {"type": "boolean"}}}},
        },
    }

    def check(self, node: Node, graph: Graph) -> list[GraphIssue]:
        issues = []
        if node.queue == "ai":
            issues.append(GraphIssue(f"node '{node.id}': a planner runs on the default or io queue, not ai",
                                     node=node.id, field="queue"))
        if node.config.get("provider") == "scripted" and not node.config.get("script"):
            issues.append(GraphIssue(f"node '{node.id}': the scripted provider needs a non-empty script",
                                     node=node.id, field="config.script"))
        return issues

    def run(self, call: StepCall) -> NodeResult:
        if call.subflows is None:
            raise PermanentStepError("a planner runs only on a worker (no way to start its plan)")
        config = call.config
        max_depth = int(config.get("max_depth", DEFAULT_MAX_DEPTH))
        depth = call.subflows.depth + 1
        if depth > max_depth:
            raise PermanentStepError(f"node '{call.node.id}': running its plan would nest sub-workflows {depth} "
                                     f"levels deep, past max_depth {max_depth}",
                                     details={"depth": depth, "max_depth": max_depth})
        start_input = config.get("input") or {}
        if not isinstance(start_input, dict):
            raise PermanentStepError(f"node '{call.node.id}': input must render to an object")
        # Recorded by an earlier run of this step: no second call to the model.
        plan = call.subflows.recorded_plan() or self._plan(call)
        child = call.subflows.child(plan.workflow, plan.version, start_input)
        if child.status != "completed":
            return NodeResult(waiting_on=child.id)
        tokens = int(plan.usage.get("prompt_tokens") or 0) + int(plan.usage.get("completion_tokens") or 0)
        output = {"plan": _shown(plan.graph), "validation": {"valid": True, "issues": []},
                  "workflow": plan.workflow, "version": plan.version, "child": child.id,
                  "planning_usage": plan.usage, "result": child.context}
        updates = {str(config["save_as"]): child.context} if config.get("save_as") else {}
        # The planning call and the child's spending both count toward this instance's budget.
        usage = {"tokens": child.tokens + tokens,
                 "cost_usd": round(child.cost_usd + float(plan.usage.get("cost_usd") or 0), 8),
                 "model": f"planner:{plan.usage.get('model') or 'scripted'}", "child": child.id}
        return NodeResult(output=output, context_updates=updates, usage=usage)

    def _plan(self, call: StepCall) -> RecordedPlan:
        assert call.subflows is not None
        config = call.config
        node_id = call.node.id
        max_nodes = int(config.get("max_nodes", DEFAULT_PLAN_NODES))
        allowed = config.get("allowed_functions") or None
        kinds = planner.summarize_kinds(kind.describe(call.engine) for kind in known_kinds().values())
        functions = [f for f in describe_functions() if allowed is None or f["name"] in allowed]
        try:
            messages = planner.build_messages(str(config.get("objective") or ""), kinds, functions, max_nodes)
        except planner.PlanRejected as exc:
            raise PermanentStepError(f"node '{node_id}': {exc}") from None
        reply = self._ask(call, messages)
        try:
            graph = planner.parse_plan(reply.text, max_nodes)
        except planner.PlanRejected as exc:
            raise PermanentStepError(f"node '{node_id}': the plan was refused: {exc}",
                                     details={"reply": (reply.text or "")[:500]}) from None
        # The planner's own restrictions, over every node, tool target and compensation
        # (engine/plan_checks.py); the full validation of a saved graph follows in record_plan.
        refused = plan_checks.plan_issues(graph, allowed, tuple(config.get("allowed_credentials") or ()))
        if refused:
            raise PermanentStepError(f"node '{node_id}': the plan was refused: {planner.plan_issues_text(refused)}",
                                     details={"plan": graph, "issues": [i.as_dict() for i in refused]})
        graph["settings"] = bounded(graph.get("settings"), call.subflows.remaining())
        model = "scripted" if reply.model == "scripted" else str(config.get("model") or reply.model or DEFAULT_MODEL)
        usage = planner.usage_of(reply.usage, model, call.engine.llm_prices)
        return call.subflows.record_plan(graph, usage, str(config.get("objective")))

    def _ask(self, call: StepCall, messages: list[dict[str, str]]) -> providers.LLMReply:
        config = call.config
        provider = config.get("provider") or ("openai" if config.get("credential")
                                              else call.engine.llm_default_provider)
        if provider == "scripted":
            if not config.get("script"):
                raise ConfigError(f"node '{call.node.id}' names no provider and none is configured: the "
                                  "default is the scripted provider, which needs a script")
            reply, _delay = providers.scripted_reply(list(config["script"]), 0)
            return reply
        account = call.provider
        model = str(config.get("model") or DEFAULT_MODEL)
        if account is not None and account.models and model not in account.models:
            raise PermanentStepError(f"model {model!r} is not one credential '{account.name}' allows "
                                     f"({', '.join(account.models)})")

        # A loop of its own, whose provider session is closed before it ends.
        return outbound.run_closing(providers.openai_chat(
            base_url=account.base_url if account is not None else call.engine.llm_base_url,
            # As an llm node's: the environment's provider is the operator's (trusted), a
            # credential's URL is typed by a designer (checked like an http node's).
            policy=(outbound.Policy(trusted=True) if account is None
                    else outbound.Policy(allowlist=tuple(call.engine.http_allowlist))),
            api_key=account.api_key if account is not None else call.engine.llm_api_key,
            model=model, messages=list(messages),
            timeout_s=float(call.node.timeout_s or call.engine.default_timeout_s),
            limit=call.engine.llm_max_per_provider, extra={"temperature": 0}, traceparent=call.trace_id))


def bounded(settings: Any, remaining: dict[str, float | int | None]) -> dict[str, Any]:
    """The plan's settings, given no more budget, tokens or transitions than the parent has left."""
    out = dict(settings) if isinstance(settings, dict) else {}
    for key, floor in (("budget_usd", 0.0), ("budget_tokens", 1), ("max_transitions", 1)):
        left = remaining.get(key)
        if left is None:
            continue
        left = max(round(left, 6) if key == "budget_usd" else left, floor)
        out[key] = min(out[key], left) if isinstance(out.get(key), int | float) else left
        if key != "budget_usd":
            out[key] = int(out[key])
    return out


def _shown(graph: dict[str, Any]) -> dict[str, Any]:
    """The plan as the step output shows it: the graph without the recording's own note."""
    return {k: v for k, v in graph.items() if k != "planned"}
