"""Ask an LLM for a workflow graph that meets an objective, and validate what it proposes.

The prompt and the strict reading of the reply are plain Python (workflows/engine/planner.py); this
module supplies what needs the deployment: the node kinds and functions it serves, the provider (the
environment's default, a stored provider credential, or `scripted` with a script), and validation with
credential names (workflows/credentials.validate). The editor's and the v1 API's `plan` endpoints call
`propose`; nothing is saved: a plan becomes a version only when a designer saves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workflows.credentials.store import for_node
from workflows.credentials.store import validate as validate_graph
from workflows.engine import limits, outbound, planner, providers
from workflows.engine.errors import ConfigError, GraphIssue, OutboundBlocked, ProviderError, StepTimeout
from workflows.engine.functions import describe_functions
from workflows.engine.graph import Node
from workflows.engine.nodes import known_kinds
from workflows.runtime import engine_config

DEFAULT_MODEL = "gpt-4o-mini"
PLAN_TIMEOUT_S = 120.0  # one planning call from a request; a worker's planner node has its own timeout


class PlanFailed(ValueError):
    """The plan could not be had (bad request, provider failure, unreadable reply); str() says why.
    `status` is the HTTP status an endpoint answers with."""

    def __init__(self, message: str, status: int = 400, issues: list[GraphIssue] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.issues = issues or []


@dataclass
class PlanRequest:
    objective: str
    provider: str | None = None  # "openai" | "scripted"; None: the credential's, else the deployment's default
    credential: str | None = None
    model: str | None = None
    script: list[dict[str, Any]] = field(default_factory=list)
    max_nodes: int = limits.MAX_NODES


@dataclass
class Plan:
    graph: dict[str, Any]
    issues: list[GraphIssue]
    usage: dict[str, Any]
    messages: list[dict[str, str]]


def request_from(body: dict[str, Any]) -> PlanRequest:
    """A PlanRequest from a JSON body ({objective, provider?, credential?, model?, script?}), or PlanFailed."""
    objective = body.get("objective")
    if not isinstance(objective, str):
        raise PlanFailed("'objective' must be a string saying what the workflow should do")
    for key in ("provider", "credential", "model"):
        if body.get(key) is not None and (not isinstance(body[key], str) or len(body[key]) > 200):
            raise PlanFailed(f"'{key}' must be a string of at most 200 characters")
    provider = body.get("provider") or None
    if provider not in (None, "openai", "scripted"):
        raise PlanFailed(f"'provider' must be 'openai' or 'scripted', not {provider!r}")
    script = body.get("script") or []
    if not isinstance(script, list) or not all(isinstance(entry, dict) for entry in script):
        raise PlanFailed("'script' must be a list of scripted replies ({\"text\": ...})")
    return PlanRequest(objective=objective, provider=provider, credential=body.get("credential") or None,
                       model=body.get("model") or None, script=script)


def build_messages(objective: str, max_nodes: int = limits.MAX_NODES,
                   allowed_functions: list[str] | None = None) -> list[dict[str, str]]:
    """The planning prompt with this deployment's node kinds and functions (optionally an allow-list)."""
    engine = engine_config()
    kinds = planner.summarize_kinds(kind.describe(engine) for kind in known_kinds().values())
    functions = [f for f in describe_functions() if allowed_functions is None or f["name"] in allowed_functions]
    return planner.build_messages(objective, kinds, functions, max_nodes=max_nodes)


def propose(request: PlanRequest) -> Plan:
    """Ask the provider for a graph and validate it. A reply that is not a graph raises PlanFailed; a
    graph with problems is returned with its `issues` (the caller decides whether to refuse it)."""
    try:
        messages = build_messages(request.objective, request.max_nodes)
    except planner.PlanRejected as exc:
        raise PlanFailed(str(exc)) from None
    reply = call_provider(request, messages)
    try:
        graph = planner.parse_plan(reply.text, request.max_nodes)
    except planner.PlanRejected as exc:
        raise PlanFailed(f"the proposal was refused: {exc}", 422) from None
    model = "scripted" if reply.model == "scripted" else str(request.model or reply.model or DEFAULT_MODEL)
    usage = planner.usage_of(reply.usage, model, engine_config().llm_prices)
    return Plan(graph=graph, issues=validate_graph(graph), usage=usage, messages=messages)


def call_provider(request: PlanRequest, messages: list[dict[str, str]],
                  timeout_s: float = PLAN_TIMEOUT_S) -> providers.LLMReply:
    """One chat call, chosen as an llm node chooses (engine/nodes/llm.py): a credential's provider is
    designer-typed, so its URL is checked like an http node's; the environment's is trusted."""
    engine = engine_config()
    provider = request.provider or ("openai" if request.credential else engine.llm_default_provider)
    if provider == "scripted":
        if not request.script:
            raise PlanFailed("the scripted provider needs a 'script' (its first reply's text is the graph); "
                             "configure STEADYFLOW_LLM_API_KEY or pick a provider credential to plan with a model")
        try:
            reply, _delay = providers.scripted_reply(request.script, 0)
        except ProviderError as exc:
            raise PlanFailed(str(exc), 502) from None
        return reply
    if not request.credential and engine.llm_default_provider == "scripted":
        # No key and no base URL configured: the default endpoint would only refuse (or, keyless, be a
        # stranger's). Say what to configure instead of calling it.
        raise PlanFailed("no LLM provider is configured (STEADYFLOW_LLM_API_KEY or STEADYFLOW_LLM_BASE_URL): "
                         "pick a provider credential, or the scripted provider with a script")
    account = None
    if request.credential:
        try:
            _scope, account = for_node(Node(id="plan", type="llm", config={"credential": request.credential}),
                                       frozenset())
        except ConfigError as exc:
            raise PlanFailed(str(exc).replace("node 'plan': ", "")) from None
    model = request.model or DEFAULT_MODEL
    if account is not None and account.models and model not in account.models:
        raise PlanFailed(f"model {model!r} is not one credential '{account.name}' allows "
                         f"({', '.join(account.models)})")
    chat = providers.openai_chat(
        base_url=account.base_url if account is not None else engine.llm_base_url,
        policy=(outbound.Policy(trusted=True) if account is None
                else outbound.Policy(allowlist=tuple(engine.http_allowlist))),
        api_key=account.api_key if account is not None else engine.llm_api_key,
        model=model, messages=list(messages), timeout_s=timeout_s, limit=engine.llm_max_per_provider,
        extra={"temperature": 0})
    try:
        # A loop of its own, whose provider session is closed before it ends.
        return outbound.run_closing(chat)
    except (ProviderError, StepTimeout, OutboundBlocked) as exc:
        # The error texts are scrubbed of the key by providers.openai_chat.
        raise PlanFailed(f"the LLM provider failed: {exc}", 502) from None
