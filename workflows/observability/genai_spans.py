"""OpenTelemetry's GenAI semantic conventions on llm and tool-call step spans (workflows/observability/tracing.py).

An OTLP backend that understands `gen_ai.*` (Langfuse, Phoenix, ...) then shows each model call with
its provider, model, tokens and finish reasons, and each tool call by name. Prompts and completions
go on the span only when OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is true (the variable
OpenTelemetry's own GenAI instrumentations read), and only as the step's stored record has them:
its input with secret references in place of values (runtime/redaction.py) and its scrubbed output.
"""

from __future__ import annotations

import json
import os
from typing import Any

from workflows.engine.nodes.llm_tools import is_tool_step, split_tool_step_id

LLM_KINDS = frozenset({"llm", "planner"})
CONTENT_LIMIT = 16_000  # characters of a captured message list: a span is no place for a transcript


def capture_content() -> bool:
    return os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() in {"1", "true", "yes"}


def attributes(node_type: str, node_id: str, step_input: Any, fields: dict[str, Any],
               default_provider: str, content: bool) -> dict[str, Any]:
    """The gen_ai.* attributes of one step attempt's span (empty for other kinds of step)."""
    if is_tool_step(node_id):
        return tool_attributes(node_id, step_input)
    if node_type not in LLM_KINDS:
        return {}
    config: dict[str, Any] = step_input if isinstance(step_input, dict) else {}
    usage: dict[str, Any] = fields.get("usage") or {}
    output: dict[str, Any] = fields["output"] if isinstance(fields.get("output"), dict) else {}
    provider = str(config.get("provider") or ("openai" if config.get("credential") else default_provider))
    requested = str(config.get("model") or usage.get("model") or "")
    found: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # the older name of the same attribute, still read by many backends
        "gen_ai.request.model": requested,
        "gen_ai.usage.input_tokens": own_tokens(usage, output, "prompt_tokens"),
        "gen_ai.usage.output_tokens": own_tokens(usage, output, "completion_tokens"),
    }
    if usage.get("model"):
        found["gen_ai.response.model"] = str(usage["model"])
    reasons = finish_reasons(output)
    if reasons:
        found["gen_ai.response.finish_reasons"] = reasons
    if content:
        found.update(message_content(config, output))
    return found


def own_tokens(usage: dict[str, Any], output: dict[str, Any], key: str) -> int:
    """This call's tokens: an llm step's usage adds up every round of its tool conversation
    (llm_tools.total_usage), so a backend summing the spans' tokens would count earlier calls again.
    The last call's own usage is kept as `call_usage`; while waiting for tools, the earlier rounds
    are taken off."""
    if isinstance(output.get("call_usage"), dict):
        return int(output["call_usage"].get(key) or 0)
    rounds = output.get("rounds")
    earlier = (rounds[:-1] if output.get("waiting_for_tools") else rounds) if isinstance(rounds, list) else []
    before = sum(int((r.get("usage") or {}).get(key) or 0) for r in earlier if isinstance(r, dict))
    return max(int(usage.get(key) or 0) - before, 0)


def tool_attributes(node_id: str, step_input: Any) -> dict[str, Any]:
    _, tool = split_tool_step_id(node_id)
    found: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if isinstance(step_input, dict) and step_input.get("call_id"):
        found["gen_ai.tool.call.id"] = str(step_input["call_id"])
    return found


def finish_reasons(output: dict[str, Any]) -> list[str]:
    """What ended the model's turn, as the step's output shows it: it asked for tools, or it answered."""
    if output.get("waiting_for_tools"):
        return ["tool_calls"]
    if output.get("fallback"):
        return []  # no model was called: the breaker's rule answered
    return ["stop"] if output else []


def message_content(config: dict[str, Any], output: dict[str, Any]) -> dict[str, str]:
    messages = []
    if config.get("system"):
        messages.append({"role": "system", "parts": [{"type": "text", "content": str(config["system"])}]})
    if config.get("prompt") is not None:
        messages.append({"role": "user", "parts": [{"type": "text", "content": str(config["prompt"])}]})
    found = {"gen_ai.input.messages": bounded(messages)}
    if isinstance(output.get("text"), str):
        found["gen_ai.output.messages"] = bounded(
            [{"role": "assistant", "parts": [{"type": "text", "content": output["text"]}]}])
    return found


def bounded(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= CONTENT_LIMIT else text[:CONTENT_LIMIT - 1] + "…"
