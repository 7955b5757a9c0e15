from __future__ import annotations

import asyncio
import contextvars
import copy
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, TypeVar

import jsonschema

from workflows.engine import limits, llm_cache, llm_stream, native_providers, outbound, providers
from workflows.engine.errors import CircuitOpen, ConfigError, GraphIssue, ProviderError, StepError, StepTimeout
from workflows.engine.graph import Graph, Node
from workflows.engine.nodes import llm_tools
from workflows.engine.nodes.base import EngineConfig, NodeKind, NodeResult, StepCall
from workflows.engine.nodes.registry import register

T = TypeVar("T")

ROUTE_INSTRUCTION = "Reply with exactly one of these words and nothing else: {routes}."


@register
class LLM(NodeKind):
    """A chat completion. With `routes`, the reply picks the route (edges test `route == '...'`).

    Runs on the `ai` queue, whose consumer keeps many calls in flight on one event loop.
    """

    name = "llm"
    default_queue = "ai"
    is_async = True
    label = "LLM"
    circuit_fallback = True
    icon = "✦"
    color = "#db2777"
    # `credential` names a stored credential, never a template (breaker keys stay bounded).
    raw_config_keys = frozenset({"script", "routes", "credential", "tools"})
    config_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "required": ["prompt"],
        "additionalProperties": False,
        "properties": {
            # The default shown here is the engine's (EngineConfig.llm_default_provider): see describe().
            "provider": {"type": "string", "enum": ["openai", "anthropic", "gemini", "scripted"],
                         "default": "scripted",
                         "title": "Provider"},
            "credential": {"type": "string", "minLength": 1, "maxLength": 64,
                           "title": "Provider credential (empty: the environment's provider)"},
            "model": {"type": "string", "title": "Model", "default": "gpt-4o-mini"},
            "system": {"type": "string", "title": "System prompt", "format": "textarea"},
            "prompt": {"type": "string", "title": "Prompt (templates allowed)", "format": "textarea"},
            "routes": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True,
                       "title": "Routes the reply chooses from"},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "max_tokens": limits.number(1, limits.MAX_LLM_TOKENS, integer=True),
            "save_as": {"type": "string", "title": "Also store the reply text in context[...]"},
            # Opt-in: the live view shows the reply as it arrives (engine/llm_stream.py); only the
            # whole reply is recorded.
            "stream": {"type": "boolean", "title": "Stream the reply to the live view"},
            # Opt-in response cache (workflows/engine/llm_cache.py): same call within ttl_s -> stored reply.
            "cache": {"type": "object", "title": "Response cache", "additionalProperties": False,
                      "required": ["ttl_s"],
                      "properties": {"ttl_s": limits.number(1, limits.MAX_LLM_CACHE_TTL_S, integer=True,
                                                            title="Keep replies for (seconds)")}},
            # Agent tool calls (engine/nodes/llm_tools.py): left unrendered, an http target's
            # templates read the call's `args` when its tool step runs.
            "tools": llm_tools.TOOLS_SCHEMA,
            "max_tool_rounds": llm_tools.MAX_TOOL_ROUNDS_SCHEMA,
            "script": {
                "type": "array",
                "title": "Scripted responses (in order; the last repeats)",
                "description": "The replies the scripted provider gives instead of a model (demos, tests), one "
                               "object per call: text, route, tool_calls, usage {prompt_tokens, "
                               "completion_tokens, cost_usd}, error, delay_s",
                "examples": [[{"text": "Refund approved: the parcel arrived broken.", "route": "answer"}]],
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "text": {"type": "string"},
                        "route": {"type": "string"},
                        "tool_calls": {"type": "array"},
                        "usage": {"type": "object"},
                        "error": {"type": "string"},
                        "permanent": {"type": "boolean"},
                        "delay_s": limits.number(0, limits.MAX_SCRIPT_DELAY_S),
                        # How a streaming node (`stream: true`) receives this text: in pieces.
                        "chunk_chars": limits.number(1, limits.MAX_SCRIPT_CHUNK_CHARS, integer=True),
                        "chunk_delay_s": limits.number(0, limits.MAX_SCRIPT_DELAY_S),
                    },
                },
            },
        },
    }

    def describe(self, engine: EngineConfig | None = None) -> dict[str, Any]:
        described = super().describe(engine)
        if engine is not None:
            schema = copy.deepcopy(self.config_schema)
            schema["properties"]["provider"]["default"] = engine.llm_default_provider
            described["schema"] = schema
        return described

    def check(self, node: Node, graph: Graph) -> list[GraphIssue]:
        issues: list[GraphIssue] = []
        config = node.config
        if config.get("provider") == "scripted" and not config.get("script"):
            issues.append(GraphIssue(f"node '{node.id}': the scripted provider needs a non-empty script",
                                     node=node.id, field="config.script"))
        routes = config.get("routes") or []
        for i, entry in enumerate(config.get("script") or []):
            route = entry.get("route")
            if route is not None and routes and route not in routes:
                issues.append(GraphIssue(
                    f"node '{node.id}': script entry {i + 1} routes to '{route}', not one of {routes}",
                    node=node.id, field=f"config.script.{i}.route"))
        return issues + _check_tools(node)

    def run(self, call: StepCall) -> NodeResult:
        # Only reached when an llm node is routed to a synchronous queue: a loop of its own, whose
        # provider session is closed before it ends.
        return outbound.run_closing(self.arun(call))

    async def arun(self, call: StepCall) -> NodeResult:
        config = call.config
        routes: list[str] = list(config.get("routes") or [])
        cache_key = _cache_key(call, routes)
        if cache_key is not None and call.cache is not None:
            # Before the breaker: a stored reply calls no provider, so it is served even when one is down.
            hit = await _off_loop(call, call.cache.get, cache_key, call.now)
            if hit is not None:
                return llm_cache.hit_result(hit, call.now, _model(config), config.get("save_as"))
        gate = call.breaker
        # The breaker's state lives in the database: its calls run off the event loop.
        if gate is not None and not await _off_loop(call, gate.allow):
            return _fallback(call, gate.key)
        try:
            reply = await self._call_provider(call, routes)
        except StepError as exc:
            if call.secrets is not None:
                call.secrets.scrub_error(exc)  # a provider echoing what it was sent
            if not isinstance(exc, ProviderError | StepTimeout):
                raise
            if gate is not None:
                # Only provider-side failures count (5xx, 429, timeouts, unreachable): a permanent
                # error (400/404/422: a bad model name, a bad request) is this node's own, and must not
                # open the provider's breaker for every workflow. It fails the step all the same.
                await _off_loop(call, gate.release if exc.permanent else partial(gate.record, False))
            raise
        if gate is not None:
            await _off_loop(call, gate.record, True)
        if reply.tool_calls and config.get("tools"):
            return _tool_round(call, reply)
        if routes and reply.route not in routes:
            # A reply naming no known route: the provider answered, so the breaker counted a success,
            # but the step fails (and is retried per its policy).
            raise ProviderError(f"the model chose route {reply.route!r}, not one of {routes}",
                                details={"reply": (reply.text or "")[:200]})
        usage = _usage(reply, str(config.get("model") or reply.model), call.engine.llm_prices)
        output: dict[str, Any] = {"text": reply.text, "route": reply.route, "tool_calls": reply.tool_calls,
                                  "usage": usage}
        output = llm_tools.final_output(output, call.tool_rounds)
        usage = output["usage"]
        updates = {config["save_as"]: reply.text} if config.get("save_as") else {}
        ttl = llm_cache.ttl_of(config)
        if cache_key is not None and call.cache is not None and ttl is not None:
            # Only a reply that makes the step succeed is stored: errors never are; and stored as a
            # step output is, without a secret the model echoed (a hit is served to other instances).
            stored = call.secrets.scrub(output) if call.secrets is not None else output
            await _off_loop(call, call.cache.put, cache_key, stored, usage, call.now, ttl)
            output = {**output, "cache": {"hit": False, "stored": True}}
        return NodeResult(output=output, usage=usage, context_updates=updates)


    async def _call_provider(self, call: StepCall, routes: list[str]) -> providers.LLMReply:
        config = call.config
        if provider_of(config, call.engine.llm_default_provider) == "scripted":
            if not config.get("script") and not config.get("provider"):
                raise ConfigError(f"node '{call.node.id}' names no provider and none is configured "
                                  "(STEADYFLOW_LLM_API_KEY or STEADYFLOW_LLM_BASE_URL): the default is the "
                                  "scripted provider, which needs a script")
            reply, delay = providers.scripted_reply(list(config.get("script") or []), call.call_index)
            if delay:
                await asyncio.sleep(delay)
            if _streams(call) and call.on_partial is not None:
                entry = llm_stream.script_entry(list(config["script"]), call.call_index)
                return await llm_stream.scripted_stream(reply, entry, _partial_sink(call))
            return reply
        account = call.provider
        model = str(config.get("model") or "gpt-4o-mini")
        if account is not None and account.models and model not in account.models:
            # Permanent and the node's own: not counted against the provider's breaker.
            raise ProviderError(f"model {model!r} is not one credential '{account.name}' allows "
                                f"({', '.join(account.models)})", permanent=True)
        messages = llm_tools.conversation(_messages(config, routes), call.tool_rounds)
        if provider_of(config, call.engine.llm_default_provider) in native_providers.NATIVE:
            reply = await _call_native(call, model, messages)
        else:
            reply = await self._call_openai(call, model, messages)
        if routes and reply.route is None:
            reply.route = _route_from_text(reply.text or "", routes)
        return reply

    async def _call_openai(self, call: StepCall, model: str, messages: list[dict[str, Any]]) -> providers.LLMReply:
        config, account = call.config, call.provider
        tools = llm_tools.openai_tools(config)
        chat = (partial(llm_stream.openai_chat_stream, on_text=_partial_sink(call))
                if _streams(call) and call.on_partial is not None else providers.openai_chat)
        reply = await chat(
            base_url=account.base_url if account is not None else call.engine.llm_base_url,
            # The environment's provider is operator-configured, so it may be a local model server
            # (trusted, still pinned); a credential's base URL is typed by a designer, so it is checked
            # like an http node's URL.
            policy=(outbound.Policy(trusted=True) if account is None
                    else outbound.Policy(allowlist=tuple(call.engine.http_allowlist))),
            api_key=account.api_key if account is not None else call.engine.llm_api_key,
            model=model,
            messages=call.secrets.reveal(messages) if call.secrets is not None else messages,
            timeout_s=float(call.node.timeout_s or call.engine.default_timeout_s),
            limit=call.engine.llm_max_per_provider,
            extra={**{k: config[k] for k in ("temperature", "max_tokens") if k in config},
                   **({"tools": tools} if tools else {})},
            traceparent=call.trace_id,
        )
        return reply


async def _call_native(call: StepCall, model: str, messages: list[dict[str, Any]]) -> providers.LLMReply:
    """Anthropic's or Gemini's own API (engine/native_providers.py), through the node's credential:
    its base URL (or the provider's public one) and key. Typed by a designer, so checked like an http
    node's URL."""
    config, account = call.config, call.provider
    provider = str(config.get("provider"))
    if account is None:
        raise ConfigError(f"node '{call.node.id}': provider '{provider}' needs a provider credential "
                          "(config.credential) holding its API key")
    if not native_providers.MODEL_NAME.fullmatch(model):
        raise ProviderError(f"model {model!r} is not a valid model name for provider '{provider}'", permanent=True)
    chat = native_providers.anthropic_chat if provider == "anthropic" else native_providers.gemini_chat
    return await chat(
        base_url=account.base_url or native_providers.default_base_url(provider),
        policy=outbound.Policy(allowlist=tuple(call.engine.http_allowlist)),
        api_key=account.api_key, model=model,
        messages=call.secrets.reveal(messages) if call.secrets is not None else messages,
        tools=list(config.get("tools") or []),
        timeout_s=float(call.node.timeout_s or call.engine.default_timeout_s),
        limit=call.engine.llm_max_per_provider,
        extra={k: config[k] for k in ("temperature", "max_tokens") if k in config},
        traceparent=call.trace_id,
        on_text=call.on_partial if _streams(call) else None,
    )


def provider_of(config: dict[str, Any], default: str) -> str:
    """The provider an llm node's (rendered) config calls: its own, else the deployment's default."""
    provider = config.get("provider")
    if provider:
        return str(provider)
    # A node that names a provider credential calls that (OpenAI-compatible) provider.
    return "openai" if config.get("credential") else default


def _streams(call: StepCall) -> bool:
    """The node opted in to streaming and the worker takes partial replies (the ai consumer does)."""
    return bool(call.config.get("stream")) and call.on_partial is not None


def _partial_sink(call: StepCall) -> Callable[[str], None]:
    """Where the text so far goes: the live view, which gets it scrubbed as an output would be, and
    never with the start of a secret the next chunk would complete."""
    sink = call.on_partial
    assert sink is not None
    scope = call.secrets
    if scope is None or not scope:
        return sink
    return lambda text: sink(scope.scrub_partial(text))


def _model(config: dict[str, Any]) -> str:
    return str(config.get("model") or "gpt-4o-mini")


async def _off_loop(call: StepCall, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on the call's executor (StepCall.offload), as asyncio.to_thread runs it: in a copy
    of this context (log lines still name the step)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(call.offload, partial(context.run, fn, *args))


def _cache_key(call: StepCall, routes: list[str]) -> str | None:
    """The node's cache key, or None when it does not opt in (then no cache is consulted at all)."""
    if call.cache is None or llm_cache.ttl_of(call.config) is None:
        return None
    provider = provider_of(call.config, call.engine.llm_default_provider)
    return llm_cache.key_for(call.config, provider=provider, model=_model(call.config),
                             endpoint="" if provider == "scripted" else call.engine.llm_base_url,
                             messages=llm_tools.conversation(_messages(call.config, routes), call.tool_rounds))


def _tool_round(call: StepCall, reply: providers.LLMReply) -> NodeResult:
    """The model asked for tool calls: a round for the runtime to run (engine/nodes/llm_tools.py)."""
    usage = _usage(reply, str(call.config.get("model") or reply.model), call.engine.llm_prices)
    rnd = llm_tools.plan_round(call.node.id, call.config, call.tool_rounds, reply.tool_calls, reply.text, usage)
    if call.secrets is not None:
        # The model's arguments, text and the errors naming them become a tool step's input, an event
        # and the row: scrubbed of what the prompt carried, as any output is. The arguments were
        # checked against the tool's schema first; a scrubbed one reaches the tool as "[redacted]".
        rnd = call.secrets.scrub(rnd)
    rounds = [*call.tool_rounds, rnd]
    output = {"waiting_for_tools": True, "tool_rounds": len(rounds), "rounds": rounds}
    return NodeResult(output=output, usage=usage, tool_round=rnd)


def _check_tools(node: Node) -> list[GraphIssue]:
    """The tools' checks at save; an http target's config must pass the http node's schema."""
    from workflows.engine.functions import get_function
    from workflows.engine.nodes.registry import get_kind

    validator = jsonschema.Draft202012Validator(get_kind("http").config_schema)

    def check_http(config: dict[str, Any]) -> list[str]:
        return [error.message for error in validator.iter_errors(config)]

    return llm_tools.check_tools(node, function_exists=lambda name: get_function(name) is not None,
                                 check_http=check_http)


def _fallback(call: StepCall, breaker_key: str) -> NodeResult:
    """The breaker is open: take the node's static rule, or halt into review without one."""
    fallback = call.node.fallback or {}
    if fallback.get("mode") != "rule":
        raise CircuitOpen(f"circuit breaker for {breaker_key} is open and node '{call.node.id}' has no rule "
                          "fallback", details={"breaker": breaker_key})
    output = fallback.get("output")
    if not isinstance(output, dict):
        output = {"text": output} if output is not None else {}
    output = {"text": None, "tool_calls": [], **output, "fallback": True, "breaker": breaker_key}
    if "route" in fallback:
        output["route"] = fallback["route"]
    return NodeResult(output=output, degraded=True)


def _messages(config: dict[str, Any], routes: list[str]) -> list[dict[str, Any]]:
    messages = []
    system = config.get("system") or ""
    if routes:
        system = (system + "\n" if system else "") + ROUTE_INSTRUCTION.format(routes=", ".join(routes))
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": str(config.get("prompt", ""))})
    return messages


def _route_from_text(text: str, routes: list[str]) -> str | None:
    cleaned = text.strip().strip(".").strip().lower()
    for route in routes:
        if cleaned == route.lower():
            return route
    found = [route for route in routes if route.lower() in cleaned]
    return found[0] if len(found) == 1 else None


def _usage(reply: providers.LLMReply, model: str, prices: Any) -> dict[str, Any]:
    prompt_tokens = int(reply.usage.get("prompt_tokens") or 0)
    completion_tokens = int(reply.usage.get("completion_tokens") or 0)
    price = prices.get(model) or prices.get("*") or {}
    cache_read = int(reply.usage.get("cache_read_tokens") or 0)
    cache_write = int(reply.usage.get("cache_write_tokens") or 0)
    cost = reply.usage.get("cost_usd")
    if cost is None:
        # Cached prompt tokens at their own prices where the price list names them (native providers
        # report them; engine/native_providers.py), else at the prompt price.
        prompt_price = float(price.get("prompt_per_1k", 0))
        cost = ((prompt_tokens - cache_read - cache_write) * prompt_price
                + cache_read * float(price.get("cache_read_per_1k", prompt_price))
                + cache_write * float(price.get("cache_write_per_1k", prompt_price))
                + completion_tokens * float(price.get("completion_per_1k", 0))) / 1000
    usage = {"model": model, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "cost_usd": round(float(cost), 8)}
    if cache_read or cache_write:
        usage.update(cache_read_tokens=cache_read, cache_write_tokens=cache_write)
    return usage
