"""LLM providers: `scripted` (offline, returns configured responses in order) and `openai`
(any OpenAI-compatible chat-completions endpoint, called through the guarded asyncio outbound client,
aiohttp underneath so hundreds of calls can be in flight on one event loop; see docs/STACK_NOTES.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workflows.engine import outbound
from workflows.engine.errors import OutboundBlocked, PermanentStepError, ProviderError, StepTimeout
from workflows.engine.secrets import scrub_text


@dataclass
class LLMReply:
    text: str | None = None
    route: str | None = None
    tool_calls: list[Any] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    model: str = ""


def scripted_reply(script: list[dict[str, Any]], call_index: int) -> tuple[LLMReply, float]:
    """The response for the `call_index`-th call (0-based); the last one repeats."""
    if not script:
        raise PermanentStepError("scripted provider has an empty script")
    entry = script[min(call_index, len(script) - 1)]
    if entry.get("error"):
        raise ProviderError(f"scripted provider error: {entry['error']}",
                            permanent=bool(entry.get("permanent", False)))
    reply = LLMReply(
        text=entry.get("text"),
        route=entry.get("route"),
        tool_calls=list(entry.get("tool_calls") or []),
        usage=dict(entry.get("usage") or {}),
        model="scripted",
    )
    return reply, float(entry.get("delay_s") or 0)


async def close_sessions() -> None:
    await outbound.close_pools()


async def chat_completion(*, base_url: str, api_key: str, payload: dict[str, Any], timeout_s: float, limit: int,
                          policy: outbound.Policy, traceparent: str | None = None, stream: bool = False,
                          on_chunk: Callable[[bytes], None] | None = None) -> outbound.Reply:
    """POST an OpenAI chat-completions request (provider_post says where it may go and what its
    errors are)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return await provider_post(base_url.rstrip("/") + "/chat/completions", payload=payload, headers=headers,
                               secret=api_key, pool=base_url, timeout_s=timeout_s, limit=limit, policy=policy,
                               traceparent=traceparent, stream=stream, on_chunk=on_chunk)


async def provider_post(url: str, *, payload: dict[str, Any], headers: Mapping[str, str], secret: str, pool: str,
                        timeout_s: float, limit: int, policy: outbound.Policy, traceparent: str | None = None,
                        stream: bool = False, on_chunk: Callable[[bytes], None] | None = None) -> outbound.Reply:
    """POST a provider request through the guarded client and map what can go wrong to step errors
    (the one place for every provider, plain and streamed): 429/5xx and transport failures are
    provider-side (counted by the breaker), other 4xx permanent; the key (`secret`) never reaches a
    message. `policy` says where the URL may point: trusted for the operator's STEADYFLOW_LLM_BASE_URL
    (a local model server is fine), untrusted for anything users can type."""
    sent = {"Content-Type": "application/json", **headers}
    if stream:
        sent["Accept"] = "text/event-stream"
    if traceparent:
        sent["traceparent"] = traceparent  # the step's span (workflows/runtime/observe.py)
    try:
        response = await outbound.arequest("POST", url, json=payload, headers=sent, timeout_s=timeout_s,
                                           policy=policy, pool=pool, limit=limit, on_chunk=on_chunk)
    except outbound.DeadlineExceeded:
        raise StepTimeout(f"LLM call timed out after {timeout_s:g} s") from None
    except OutboundBlocked:
        raise
    except (outbound.ResponseTooLarge, outbound.UndecodableBody) as exc:
        raise ProviderError(f"LLM provider reply {exc.message}", permanent=True) from None
    except outbound.TransportFailed as exc:
        raise ProviderError(scrub_text(f"LLM provider unreachable: {exc.message}", (secret,))) from None
    status = response.status
    if status == 429 or status >= 500:
        raise ProviderError(f"LLM provider answered HTTP {status}", details={"status": status})
    if status >= 400:
        # A provider may echo the key it was sent ("Incorrect API key provided: sk-..."): the text goes
        # into step errors and events, which every viewer reads.
        text = scrub_text(response.text, (secret,))[:300]
        raise ProviderError(f"LLM provider answered HTTP {status}: {text}", permanent=True,
                            details={"status": status})
    return response


async def openai_chat(*, base_url: str, api_key: str, model: str, messages: list[dict[str, Any]],
                      timeout_s: float, limit: int, extra: Mapping[str, Any] | None = None,
                      policy: outbound.Policy, traceparent: str | None = None) -> LLMReply:
    """One chat completion (chat_completion says where it may go and what its errors are)."""
    payload: dict[str, Any] = {"model": model, "messages": messages, **(extra or {})}
    response = await chat_completion(base_url=base_url, api_key=api_key, payload=payload, timeout_s=timeout_s,
                                     limit=limit, policy=policy, traceparent=traceparent)
    try:
        data = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        raise ProviderError("LLM provider returned a body that is not JSON") from None
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ProviderError("LLM provider returned no choices") from None
    return LLMReply(
        text=message.get("content"),
        tool_calls=[
            {"id": c.get("id"), "name": c.get("function", {}).get("name"),
             "args": c.get("function", {}).get("arguments")}
            for c in message.get("tool_calls") or []
        ],
        usage=dict(data.get("usage") or {}),
        model=str(data.get("model") or model),
    )
