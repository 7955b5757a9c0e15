"""The llm node's response cache as the engine sees it: the key, and the node's use of a cache it is
handed (an in-memory one here; workflows/adapters/llm_cache.py's table is tested in tests/workflows)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.engine.conftest import NOW, make_call
from workflows.engine import limits, providers
from workflows.engine.errors import ProviderError
from workflows.engine.llm_cache import CachedResponse, key_for
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import NodeResult, StepCall
from workflows.engine.validation import validate_graph

LLM = get_kind("llm")


class MemoryCache:
    def __init__(self) -> None:
        self.rows: dict[str, tuple[dict[str, Any], dict[str, Any], datetime, datetime]] = {}
        self.gets = 0

    def get(self, key: str, now: datetime) -> CachedResponse | None:
        self.gets += 1
        row = self.rows.get(key)
        if row is None or row[3] <= now:
            return None
        return CachedResponse(output=row[0], usage=row[1], source_step=41, created_at=row[2])

    def put(self, key: str, output: dict[str, Any], usage: dict[str, Any], now: datetime, ttl_s: float) -> None:
        self.rows[key] = (output, usage, now, now + timedelta(seconds=ttl_s))


class Gate:
    key = "llm:scripted"

    def __init__(self, allow: bool) -> None:
        self.allowed = allow

    def allow(self) -> bool:
        return self.allowed

    def record(self, ok: bool) -> None:
        pass

    def release(self) -> None:
        pass


def run(call: StepCall) -> NodeResult:
    async def go() -> NodeResult:
        try:
            return await LLM.arun(call)
        finally:
            await providers.close_sessions()

    return asyncio.run(go())


BASE = {"provider": "openai", "model": "m", "prompt": "hello", "temperature": 0.2, "cache": {"ttl_s": 60}}


def messages(config: dict[str, Any]) -> list[dict[str, Any]]:
    system = [{"role": "system", "content": config["system"]}] if config.get("system") else []
    return [*system, {"role": "user", "content": config["prompt"]}]


def key(**changes: Any) -> str:
    config = {**BASE, **changes}
    return key_for(config, provider=config["provider"], model=config["model"], endpoint="https://x/v1",
                   messages=messages(config))


@pytest.mark.parametrize("changes", [
    {"prompt": "hello!"}, {"system": "be brief"}, {"model": "other"}, {"provider": "scripted"},
    {"temperature": 0.3}, {"max_tokens": 10}, {"routes": ["a", "b"]}, {"tools": [{"name": "t"}]},
    {"credential": "team-b"},
])
def test_everything_that_shapes_the_reply_is_in_the_key(changes: dict[str, Any]) -> None:
    assert key(**changes) != key()


def test_what_only_handles_the_reply_is_not_in_the_key() -> None:
    assert key(save_as="x") == key() == key(cache={"ttl_s": 999})
    assert key() != key_for(BASE, provider="openai", model="m", endpoint="https://y/v1",
                            messages=messages(BASE))


def scripted_call(cache: MemoryCache | None, text: str = "one", **config: Any) -> StepCall:
    return make_call("llm", {"provider": "scripted", "prompt": "p", "cache": {"ttl_s": 60},
                             "script": [{"text": text, "usage": {"prompt_tokens": 100, "completion_tokens": 50,
                                                                 "cost_usd": 0.25}}], **config},
                     node_id="ask")


def with_cache(call: StepCall, cache: MemoryCache, now: datetime = NOW) -> StepCall:
    return replace(call, cache=cache, now=now)


def test_a_miss_stores_and_a_hit_costs_nothing_even_with_the_breaker_open() -> None:
    cache = MemoryCache()
    miss = run(with_cache(scripted_call(cache), cache))
    assert miss.output["cache"] == {"hit": False, "stored": True} and miss.usage["cost_usd"] == 0.25
    later = NOW + timedelta(seconds=30)
    # The breaker is open: only the cache can answer (a different script would be a different key).
    hit = run(with_cache(replace(scripted_call(cache), breaker=Gate(allow=False)), cache, later))
    assert hit.output["text"] == "one"
    assert hit.output["cache"] == {"hit": True, "source_step": 41, "age_s": 30.0, "saved_cost_usd": 0.25}
    assert hit.usage == {"model": "gpt-4o-mini", "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
                         "cached": True}
    # Past the TTL: a miss again, served by the provider; another script: another key.
    assert run(with_cache(scripted_call(cache), cache, NOW + timedelta(seconds=61))).output["cache"]["hit"] is False
    assert run(with_cache(scripted_call(cache, text="two"), cache, later)).output["text"] == "two"


def test_without_opting_in_the_cache_is_not_consulted() -> None:
    cache = MemoryCache()
    call = with_cache(make_call("llm", {"provider": "scripted", "prompt": "p", "script": [{"text": "x"}]}), cache)
    assert "cache" not in run(call).output
    assert cache.gets == 0 and not cache.rows


def test_errors_are_not_cached() -> None:
    cache = MemoryCache()
    with pytest.raises(ProviderError):
        run(with_cache(scripted_call(cache, script=[{"error": "boom"}]), cache))
    with pytest.raises(ProviderError, match="not one of"):
        run(with_cache(scripted_call(cache, routes=["a"], script=[{"text": "b", "route": "b"}]), cache))
    assert not cache.rows


def test_the_ttl_is_bounded_by_the_schema() -> None:
    def graph(ttl: Any) -> dict[str, Any]:
        return {"nodes": [{"id": "start", "type": "start"},
                          {"id": "ask", "type": "llm", "config": {"provider": "scripted", "prompt": "p",
                                                                  "script": [{"text": "x"}], "cache": {"ttl_s": ttl}}},
                          {"id": "end", "type": "end"}],
                "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}]}

    assert not validate_graph(graph(3600))
    assert validate_graph(graph(limits.MAX_LLM_CACHE_TTL_S + 1))
    assert validate_graph(graph(0))
