"""Streamed llm replies: the text as it arrives, for the live view's inspector.

An llm node with `stream: true` asks its provider for server-sent events (`stream: true`, the
OpenAI chat-completions chunk format) and hands the text received so far to `StepCall.on_partial`
after each chunk; the scripted provider sends its text in `chunk_chars` pieces, `chunk_delay_s`
apart. What `on_partial` does with it (publish, throttled, to the live view; workflows/live/partial.py)
is the worker's business: the engine only calls it, and nothing streamed is ever recorded: the step's
output is the whole reply, committed as always.

The stream is read through the guarded outbound client like any reply: SSRF checks, the body cap
(counted over the whole stream) and one total deadline (the node's timeout) for all of it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from workflows.engine import outbound
from workflows.engine.errors import ProviderError
from workflows.engine.providers import LLMReply, chat_completion
from workflows.engine.sse import SseFeed

log = logging.getLogger("steadyflow.llm")

PartialSink = Callable[[str], None]
DEFAULT_CHUNK_CHARS = 4


def _tell(sink: PartialSink, text: str) -> None:
    """A partial that cannot be shown must never fail the step."""
    try:
        sink(text)
    except Exception as exc:  # noqa: BLE001 - the live view is best effort; the output is what counts
        log.debug("a partial reply could not be passed on: %s", exc)


class StreamParser(SseFeed):
    """Server-sent events of chat-completion chunks, fed as bytes arrive: the text so far goes to
    `on_text` after each chunk that adds some; tool-call fragments, usage and model are collected."""

    def __init__(self, on_text: PartialSink) -> None:
        self.on_text = on_text
        self.text = ""
        self.usage: dict[str, Any] = {}
        self.model = ""
        self.done = False
        self.chunks = 0  # data lines parsed
        self._tools: dict[int, dict[str, str]] = {}
        super().__init__()

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return [{"name": call.get("name"), "args": call.get("arguments")} for _, call in sorted(self._tools.items())]

    def on_data(self, payload: bytes) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            raise ProviderError("LLM provider streamed a chunk that is not JSON") from None
        if not isinstance(chunk, dict):
            raise ProviderError("LLM provider streamed a chunk that is not a JSON object")
        self.chunks += 1
        if isinstance(chunk.get("usage"), dict):
            self.usage = dict(chunk["usage"])
        if chunk.get("model"):
            self.model = str(chunk["model"])
        added = False
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text += content
                added = True
            for fragment in delta.get("tool_calls") or []:
                if isinstance(fragment, dict):
                    call = self._tools.setdefault(int(fragment.get("index") or 0), {"name": "", "arguments": ""})
                    function = fragment.get("function") or {}
                    call["name"] += str(function.get("name") or "")
                    call["arguments"] += str(function.get("arguments") or "")
        if added:
            _tell(self.on_text, self.text)


async def openai_chat_stream(*, base_url: str, api_key: str, model: str, messages: list[dict[str, Any]],
                             timeout_s: float, limit: int, on_text: PartialSink,
                             extra: Mapping[str, Any] | None = None, policy: outbound.Policy,
                             traceparent: str | None = None) -> LLMReply:
    """providers.openai_chat, streamed: the same request with `stream: true`, the same errors."""
    payload: dict[str, Any] = {"model": model, "messages": messages, **(extra or {}), "stream": True,
                               "stream_options": {"include_usage": True}}
    parser = StreamParser(on_text)
    response = await chat_completion(base_url=base_url, api_key=api_key, payload=payload, timeout_s=timeout_s,
                                     limit=limit, policy=policy, traceparent=traceparent, stream=True,
                                     on_chunk=parser.feed)
    parser.close()
    if not parser.chunks:
        return _unstreamed(response, model, on_text)
    return LLMReply(text=parser.text, tool_calls=parser.tool_calls, usage=parser.usage, model=parser.model or model)


def _unstreamed(response: outbound.Reply, model: str, on_text: PartialSink) -> LLMReply:
    """A provider that ignored `stream: true` and answered one JSON body: taken as it is."""
    try:
        data = json.loads(response.body)
        message = data["choices"][0]["message"]
    except (ValueError, UnicodeDecodeError, KeyError, IndexError, TypeError):
        raise ProviderError("LLM provider returned neither a stream nor a chat completion") from None
    text = message.get("content")
    if isinstance(text, str) and text:
        _tell(on_text, text)
    calls = [c.get("function") or {} for c in message.get("tool_calls") or []]
    return LLMReply(text=text, usage=dict(data.get("usage") or {}), model=str(data.get("model") or model),
                    tool_calls=[{"name": f.get("name"), "args": f.get("arguments")} for f in calls])


async def scripted_stream(reply: LLMReply, entry: Mapping[str, Any], on_text: PartialSink) -> LLMReply:
    """The scripted provider's reply, told `chunk_chars` characters at a time, `chunk_delay_s` apart."""
    text = reply.text or ""
    size = int(entry.get("chunk_chars") or DEFAULT_CHUNK_CHARS)
    delay = float(entry.get("chunk_delay_s") or 0)
    for end in range(size, len(text) + size, size):
        if delay:
            await asyncio.sleep(delay)
        _tell(on_text, text[:end])
    return reply


def script_entry(script: list[dict[str, Any]], call_index: int) -> dict[str, Any]:
    """The scripted response a call gets (as providers.scripted_reply picks it)."""
    return script[min(call_index, len(script) - 1)] if script else {}
