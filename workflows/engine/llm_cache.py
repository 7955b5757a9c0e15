"""The llm node's response cache, as the engine sees it: the key, the interface, the hit's result.

Opt-in per node (`"cache": {"ttl_s": ...}`): a node without it never touches the cache. The storage
lives outside the engine (workflows/adapters/llm_cache.py keeps it in a database table shared by every worker
and surviving restarts) and is handed to the node on its StepCall, as the circuit breaker is.

The key is a SHA-256 of everything that shapes the reply: the provider (and its endpoint), the model,
the rendered messages, and every other config value (tools, temperature, max_tokens, routes, a
credential name, a scripted provider's script...) except the few that only say what to do with the
reply. A config key added later is in the key unless listed here: a new parameter makes misses, never
a wrong hit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from workflows.engine.nodes.base import NodeResult

# Config keys that do not change what the provider answers (system and prompt are in the messages).
NOT_IN_KEY = frozenset({"cache", "save_as", "system", "prompt", "provider", "model"})


@dataclass(frozen=True)
class CachedResponse:
    output: dict[str, Any]
    usage: dict[str, Any]
    source_step: int | None  # the step whose call produced the response
    created_at: datetime


class ResponseCache(Protocol):
    """Where cached replies live. Called off the event loop (the database behind it blocks)."""

    def get(self, key: str, now: datetime) -> CachedResponse | None:
        """The unexpired response stored under `key`, or None."""

    def put(self, key: str, output: dict[str, Any], usage: dict[str, Any], now: datetime, ttl_s: float) -> None:
        """Store a successful call's response (replacing an older one) until now + ttl_s."""


def ttl_of(config: Mapping[str, Any]) -> float | None:
    """The node's cache TTL in seconds, or None when it does not opt in."""
    cache = config.get("cache")
    if not isinstance(cache, Mapping) or not cache.get("ttl_s"):
        return None
    return float(cache["ttl_s"])


def key_for(config: Mapping[str, Any], *, provider: str, model: str, endpoint: str,
            messages: list[dict[str, Any]]) -> str:
    material = {
        "provider": provider,
        "endpoint": endpoint,
        "model": model,
        "messages": messages,
        "params": {k: v for k, v in config.items() if k not in NOT_IN_KEY},
    }
    encoded = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()


def hit_result(hit: CachedResponse, now: datetime, model: str, save_as: str | None) -> NodeResult:
    """The step's result for a cache hit: the stored reply, zero tokens and cost, the source linked."""
    saved = float(hit.usage.get("cost_usd") or 0)
    usage = {"model": model, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "cached": True}
    meta = {"hit": True, "source_step": hit.source_step, "age_s": round((now - hit.created_at).total_seconds(), 3),
            "saved_cost_usd": saved}
    output = {**hit.output, "usage": usage, "cache": meta}
    updates = {save_as: hit.output.get("text")} if save_as else {}
    return NodeResult(output=output, usage=usage, context_updates=updates)
