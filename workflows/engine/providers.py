"""LLM providers: `scripted` (offline, returns configured responses in order) and `openai`
(any OpenAI-compatible chat-completions endpoint, called with aiohttp so hundreds of calls can be
in flight on one event loop; httpx's pool degrades at that concurrency, see docs/STACK_NOTES.md).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from workflows.engine.errors import PermanentStepError, ProviderError, StepTimeout


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


# One aiohttp session and one concurrency bound per event loop and base URL.
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, aiohttp.ClientSession]] = (
    weakref.WeakKeyDictionary()
)
_bounds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _session_for(base_url: str, limit: int) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
    loop = asyncio.get_running_loop()
    sessions = _sessions.setdefault(loop, {})
    bounds = _bounds.setdefault(loop, {})
    session = sessions.get(base_url)
    if session is None or session.closed:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit, limit_per_host=limit))
        sessions[base_url] = session
        bounds[base_url] = asyncio.Semaphore(limit)
    return session, bounds[base_url]


async def close_sessions() -> None:
    loop = asyncio.get_running_loop()
    for session in _sessions.pop(loop, {}).values():
        await session.close()
    _bounds.pop(loop, None)


async def openai_chat(*, base_url: str, api_key: str, model: str, messages: list[dict[str, Any]],
                      timeout_s: float, limit: int, extra: Mapping[str, Any] | None = None,
                      traceparent: str | None = None) -> LLMReply:
    session, bound = _session_for(base_url, limit)
    headers = {"Content-Type": "application/json"}
    if traceparent:
        headers["traceparent"] = traceparent  # the step's span (workflows/runtime/observe.py)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    payload: dict[str, Any] = {"model": model, "messages": messages, **(extra or {})}
    url = base_url.rstrip("/") + "/chat/completions"
    try:
        async with bound, asyncio.timeout(timeout_s):
            async with session.post(url, json=payload, headers=headers) as response:
                status = response.status
                if status == 429 or status >= 500:
                    raise ProviderError(f"LLM provider answered HTTP {status}", details={"status": status})
                if status >= 400:
                    text = (await response.text())[:300]
                    raise ProviderError(f"LLM provider answered HTTP {status}: {text}", permanent=True,
                                        details={"status": status})
                data = await response.json(content_type=None)
    except TimeoutError:
        raise StepTimeout(f"LLM call timed out after {timeout_s:g} s") from None
    except aiohttp.ClientError as exc:
        raise ProviderError(f"LLM provider unreachable: {type(exc).__name__}: {exc}") from None
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ProviderError("LLM provider returned no choices") from None
    return LLMReply(
        text=message.get("content"),
        tool_calls=[
            {"name": c.get("function", {}).get("name"), "args": c.get("function", {}).get("arguments")}
            for c in message.get("tool_calls") or []
        ],
        usage=dict(data.get("usage") or {}),
        model=str(data.get("model") or model),
    )
