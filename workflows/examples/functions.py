"""Python functions named by the example workflows (`python` nodes call them by name)."""

from __future__ import annotations

import base64
import os
import re
from typing import Any

from workflows.engine.functions import FunctionCall, FunctionResult, register_function

SENSITIVE_WORDS = ("password", "ssn", "credit card")


@register_function("examples.clean_sources")
def clean_sources(call: FunctionCall) -> FunctionResult:
    """Join the research branches into one list of sources for the comparison step."""
    sources: list[dict[str, Any]] = []
    for node_id in ("market", "news", "competitors"):
        try:
            output = call.steps[node_id]["output"]
        except KeyError:
            continue
        body = output.get("body") if isinstance(output, dict) and "body" in output else output
        if isinstance(output, dict) and "text" in output:
            body = output["text"]
        sources.append({"source": node_id, "content": body})
    return FunctionResult(output={"sources": sources, "count": len(sources)}, context={"sources": sources})


@register_function("examples.lookup_order")
def lookup_order(call: FunctionCall) -> FunctionResult:
    """A tool the ReAct agent calls: looks up the order the LLM asked for."""
    tool_calls: list[dict[str, Any]] = []
    try:
        tool_calls = call.steps["think"]["output"].get("tool_calls") or []
    except KeyError:
        pass
    order_id = next((c.get("args", {}).get("id") for c in tool_calls if c.get("name") == "orders"), None)
    observation = {"tool": "orders", "order": order_id, "status": "shipping tomorrow"}
    observations = list(call.context.get("observations") or []) + [observation]
    return FunctionResult(output=observation, context={"observations": observations})


@register_function("examples.canned_reply")
def canned_reply(call: FunctionCall) -> dict[str, Any]:
    return {"text": "Happy to help! Is there anything about an order I can look up?"}


@register_function("examples.sensitive_word_filter")
def sensitive_word_filter(call: FunctionCall) -> FunctionResult:
    """Mask sensitive words in whichever reply reached the filter (answer or smalltalk)."""
    text = ""
    for node_id in ("answer", "smalltalk"):
        try:
            text = call.steps[node_id]["output"].get("text") or text
        except KeyError:
            continue
    masked = text
    for word in SENSITIVE_WORDS:
        masked = re.sub(re.escape(word), "*" * len(word), masked, flags=re.IGNORECASE)
    return FunctionResult(output={"text": masked, "masked": masked != text}, context={"reply": masked})


@register_function("noop")
def noop(call: FunctionCall) -> None:
    """Does nothing; used by benchmarks and tests of the engine's own overhead."""
    return None


@register_function("examples.grow_note")
def grow_note(call: FunctionCall) -> FunctionResult:
    """Adds a new context key `note_<visit>` holding `bytes` (arg, default 4000) of incompressible text
    (base64 of random bytes): the benchmark's W4 "agent transcript", a context that grows with every
    visit as an agent's transcript does. The output stays small: the visit number the loop's edges
    test (`n < steps`)."""
    size = max(0, int(call.args.get("bytes", 4000)))
    text = base64.b64encode(os.urandom(size * 3 // 4 + 1)).decode()[:size]
    return FunctionResult(output={"n": call.visit, "bytes": size}, context={f"note_{call.visit}": text})


# --- The research agent's tools (graphs/research_agent.json): the model calls them with arguments it
# chose, checked against each tool's `parameters` schema before they run.

@register_function("examples.search")
def search(call: FunctionCall) -> dict[str, Any]:
    """A tool: search a (canned, offline) index for `query`; returns up to `limit` hits."""
    query = str(call.args.get("query", ""))
    limit = int(call.args.get("limit", 3))
    hits = [{"title": f"{query.title()}: result {i + 1}", "url": f"https://example.org/{i + 1}"} for i in range(limit)]
    return {"query": query, "hits": hits}


@register_function("examples.lookup")
def lookup(call: FunctionCall) -> dict[str, Any]:
    """A tool: look a term up in a (canned, offline) glossary."""
    term = str(call.args.get("term", ""))
    return {"term": term, "definition": f"{term} is a durable way to run long workflows."}
