"""Native LLM providers beside the OpenAI-compatible one: Anthropic's Messages API and Google's Gemini API.

The llm node speaks one dialect inside (engine/nodes/llm_tools.py builds OpenAI-shaped messages:
system/user/assistant with `tool_calls`, `tool` results); each provider here translates that
conversation into its own request, and its reply (text, tool calls, usage, model) back into an
`LLMReply`, so tool rounds, the breaker, the response cache, budgets and streaming work the same
for every provider. Requests go through providers.provider_post: the guarded outbound client, its
deadlines and body cap, and the same error mapping (429/5xx/529 provider-side, other 4xx permanent,
the key never in a message).

Usage is reported in the node's terms: `prompt_tokens` counts every input token (Anthropic's
`input_tokens` plus cache reads and writes; Gemini's `promptTokenCount`), `completion_tokens` the
output; `cache_read_tokens` and `cache_write_tokens` say how many of the prompt's were cached, for
prices that charge them differently (STEADYFLOW_LLM_PRICES: cache_read_per_1k, cache_write_per_1k).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from workflows.engine import outbound
from workflows.engine.errors import ProviderError
from workflows.engine.providers import LLMReply, provider_post
from workflows.engine.sse import SseFeed

NATIVE = ("anthropic", "gemini")
ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_DEFAULT_MAX_TOKENS = 1024  # the Messages API requires max_tokens
GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
# Gemini puts the model in the URL's path: a name that could step out of it is refused.
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")

PartialSink = Callable[[str], None]


def default_base_url(provider: str) -> str:
    return ANTHROPIC_BASE_URL if provider == "anthropic" else GEMINI_BASE_URL


def _args(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as an object (the OpenAI dialect carries them as JSON text)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {"value": value}


def _body(response: outbound.Reply) -> dict[str, Any]:
    try:
        data = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        raise ProviderError("LLM provider returned a body that is not JSON") from None
    if not isinstance(data, dict):
        raise ProviderError("LLM provider returned a body that is not a JSON object")
    return data


# --- Anthropic Messages ------------------------------------------------------------------------------

def anthropic_request(model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                      extra: Mapping[str, Any]) -> dict[str, Any]:
    """The Messages API body for an OpenAI-shaped conversation: system messages join `system`, tool
    calls become `tool_use` blocks, tool results `tool_result` blocks of one user turn."""
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            turns.append({"role": "user", "content": str(message.get("content") or "")})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": str(message["content"])})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"),
                               "input": _args(function.get("arguments"))})
            turns.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            result = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"),
                      "content": str(message.get("content") or "")}
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                turns[-1]["content"].append(result)
            else:
                turns.append({"role": "user", "content": [result]})
    body: dict[str, Any] = {"model": model, "messages": turns,
                            "max_tokens": int(extra.get("max_tokens") or ANTHROPIC_DEFAULT_MAX_TOKENS)}
    if system:
        body["system"] = system
    if "temperature" in extra:
        body["temperature"] = extra["temperature"]
    if tools:
        body["tools"] = [{"name": t["name"], "description": t.get("description", ""),
                          "input_schema": t.get("parameters") or {"type": "object", "properties": {}}}
                         for t in tools]
    return body


def anthropic_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    read = int(usage.get("cache_read_input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    return {"prompt_tokens": int(usage.get("input_tokens") or 0) + read + write,
            "completion_tokens": int(usage.get("output_tokens") or 0),
            "cache_read_tokens": read, "cache_write_tokens": write}


def anthropic_reply(data: Mapping[str, Any], model: str) -> LLMReply:
    content = data.get("content")
    if not isinstance(content, list):
        raise ProviderError("LLM provider returned no content")
    texts = [str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    calls = [{"id": b.get("id"), "name": b.get("name"), "args": b.get("input") or {}}
             for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    return LLMReply(text="".join(texts) if texts else None, tool_calls=calls,
                    usage=anthropic_usage(data.get("usage") or {}), model=str(data.get("model") or model))


class AnthropicStream(SseFeed):
    """The Messages API's server-sent events, fed as bytes arrive: text deltas go to `on_text` as the
    text so far; tool_use blocks and their partial JSON input, usage and the model are collected."""

    def __init__(self, on_text: PartialSink) -> None:
        self.on_text = on_text
        self.text = ""
        self.model = ""
        self.usage: dict[str, Any] = {}
        self.events = 0
        self._blocks: dict[int, dict[str, Any]] = {}
        super().__init__()

    def reply(self, model: str) -> LLMReply:
        calls = [{"id": b["id"], "name": b["name"], "args": _args(b["json"])}
                 for _, b in sorted(self._blocks.items()) if b["type"] == "tool_use"]
        return LLMReply(text=self.text or None, tool_calls=calls, usage=anthropic_usage(self.usage),
                        model=self.model or model)

    def on_data(self, payload: bytes) -> None:
        # `event:` names repeat the data's own `type`: only the data is read.
        try:
            event = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            raise ProviderError("LLM provider streamed an event that is not JSON") from None
        if not isinstance(event, dict):
            return
        self.events += 1
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = str(message.get("model") or "")
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self._blocks[int(event.get("index") or 0)] = {"type": block.get("type"), "id": block.get("id"),
                                                          "name": block.get("name"), "json": ""}
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta" and delta.get("text"):
                self.text += str(delta["text"])
                _tell(self.on_text, self.text)
            elif delta.get("type") == "input_json_delta":
                block = self._blocks.setdefault(int(event.get("index") or 0),
                                                {"type": "tool_use", "id": None, "name": None, "json": ""})
                block["json"] += str(delta.get("partial_json") or "")
        elif kind == "message_delta":
            self.usage.update(event.get("usage") or {})
        elif kind == "error":
            error = event.get("error") or {}
            overloaded = error.get("type") in {"overloaded_error", "api_error", "rate_limit_error"}
            raise ProviderError(f"LLM provider stream failed: {str(error.get('type') or 'error')[:60]}",
                                permanent=not overloaded)


async def anthropic_chat(*, base_url: str, api_key: str, model: str, messages: list[dict[str, Any]],
                         tools: list[dict[str, Any]], timeout_s: float, limit: int, extra: Mapping[str, Any],
                         policy: outbound.Policy, traceparent: str | None = None,
                         on_text: PartialSink | None = None) -> LLMReply:
    body = anthropic_request(model, messages, tools, extra)
    headers = {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}
    stream = AnthropicStream(on_text) if on_text is not None else None
    if stream is not None:
        body["stream"] = True
    response = await provider_post(base_url.rstrip("/") + "/messages", payload=body, headers=headers, secret=api_key,
                                   pool=base_url, timeout_s=timeout_s, limit=limit, policy=policy,
                                   traceparent=traceparent, stream=stream is not None,
                                   on_chunk=stream.feed if stream is not None else None)
    if stream is not None:
        stream.close()
        if stream.events:
            return stream.reply(model)
    reply = anthropic_reply(_body(response), model)
    if on_text is not None and reply.text:
        _tell(on_text, reply.text)  # a server that ignored `stream`: the whole text at once
    return reply


# --- Gemini ------------------------------------------------------------------------------------------

def gemini_request(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                   extra: Mapping[str, Any]) -> dict[str, Any]:
    """The generateContent body: system messages become `systemInstruction`, assistant turns `model`
    turns with functionCall parts, tool results one user turn of functionResponse parts (named by
    the call they answer)."""
    names: dict[str, str] = {}
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    contents: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            contents.append({"role": "user", "parts": [{"text": str(message.get("content") or "")}]})
        elif role == "assistant":
            parts: list[dict[str, Any]] = []
            if message.get("content"):
                parts.append({"text": str(message["content"])})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                names[str(call.get("id"))] = str(function.get("name"))
                parts.append({"functionCall": {"name": function.get("name"),
                                               "args": _args(function.get("arguments"))}})
            contents.append({"role": "model", "parts": parts})
        elif role == "tool":
            text = str(message.get("content") or "")
            try:
                result = json.loads(text)
            except ValueError:
                result = text
            part = {"functionResponse": {"name": names.get(str(message.get("tool_call_id")), ""),
                                         "response": result if isinstance(result, dict) else {"result": result}}}
            if contents and contents[-1]["role"] == "user" and "functionResponse" in contents[-1]["parts"][0]:
                contents[-1]["parts"].append(part)
            else:
                contents.append({"role": "user", "parts": [part]})
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    generation = {name: extra[key] for key, name in (("temperature", "temperature"), ("max_tokens", "maxOutputTokens"))
                  if key in extra}
    if generation:
        body["generationConfig"] = generation
    if tools:
        body["tools"] = [{"functionDeclarations": [
            {"name": t["name"], "description": t.get("description", ""),
             "parameters": t.get("parameters") or {"type": "object", "properties": {}}} for t in tools]}]
    return body


def gemini_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    return {"prompt_tokens": int(usage.get("promptTokenCount") or 0),
            "completion_tokens": int(usage.get("candidatesTokenCount") or 0),
            "cache_read_tokens": int(usage.get("cachedContentTokenCount") or 0), "cache_write_tokens": 0}


def gemini_parts(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    candidates = data.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        feedback = data.get("promptFeedback") or {}
        reason = str(feedback.get("blockReason") or "no candidates")[:60]
        raise ProviderError(f"LLM provider returned no answer ({reason})", permanent=bool(feedback))
    parts = (candidates[0].get("content") or {}).get("parts") or []
    return [p for p in parts if isinstance(p, dict)]


def gemini_reply(data: Mapping[str, Any], model: str) -> LLMReply:
    parts = gemini_parts(data)
    texts = [str(p["text"]) for p in parts if isinstance(p.get("text"), str)]
    calls = [{"id": p["functionCall"].get("id"), "name": p["functionCall"].get("name"),
              "args": p["functionCall"].get("args") or {}} for p in parts if isinstance(p.get("functionCall"), dict)]
    return LLMReply(text="".join(texts) if texts else None, tool_calls=calls,
                    usage=gemini_usage(data.get("usageMetadata") or {}), model=str(data.get("modelVersion") or model))


class GeminiStream(SseFeed):
    """streamGenerateContent?alt=sse: each event is a whole GenerateContentResponse holding the next
    piece of text (or a whole function call); the last carries the usage."""

    def __init__(self, on_text: PartialSink) -> None:
        self.on_text = on_text
        self.text = ""
        self.calls: list[dict[str, Any]] = []
        self.usage: dict[str, Any] = {}
        self.model = ""
        self.events = 0
        super().__init__()

    def on_data(self, payload: bytes) -> None:
        try:
            event = json.loads(payload)
        except (ValueError, UnicodeDecodeError):
            raise ProviderError("LLM provider streamed an event that is not JSON") from None
        if not isinstance(event, dict):
            return
        self.events += 1
        piece = gemini_reply(event, "") if event.get("candidates") else None
        if piece is not None:
            if piece.text:
                self.text += piece.text
                _tell(self.on_text, self.text)
            self.calls += piece.tool_calls
        if isinstance(event.get("usageMetadata"), dict):
            self.usage = dict(event["usageMetadata"])
        if event.get("modelVersion"):
            self.model = str(event["modelVersion"])


async def gemini_chat(*, base_url: str, api_key: str, model: str, messages: list[dict[str, Any]],
                      tools: list[dict[str, Any]], timeout_s: float, limit: int, extra: Mapping[str, Any],
                      policy: outbound.Policy, traceparent: str | None = None,
                      on_text: PartialSink | None = None) -> LLMReply:
    body = gemini_request(messages, tools, extra)
    stream = GeminiStream(on_text) if on_text is not None else None
    action = "streamGenerateContent?alt=sse" if stream is not None else "generateContent"
    url = f"{base_url.rstrip('/')}/models/{model}:{action}"
    response = await provider_post(url, payload=body, headers={"x-goog-api-key": api_key}, secret=api_key,
                                   pool=base_url, timeout_s=timeout_s, limit=limit, policy=policy,
                                   traceparent=traceparent, stream=stream is not None,
                                   on_chunk=stream.feed if stream is not None else None)
    if stream is not None:
        stream.close()
        if stream.events:
            return LLMReply(text=stream.text or None, tool_calls=stream.calls, usage=gemini_usage(stream.usage),
                            model=stream.model or model)
    reply = gemini_reply(_body(response), model)
    if on_text is not None and reply.text:
        _tell(on_text, reply.text)
    return reply


def _tell(sink: PartialSink, text: str) -> None:
    """A partial that cannot be shown must never fail the step (as llm_stream's)."""
    try:
        sink(text)
    except Exception:  # noqa: BLE001, S110 - the live view is best effort; the output is what counts
        pass
