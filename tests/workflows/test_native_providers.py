"""Native providers (workflows/engine/native_providers.py): an llm node with provider `anthropic` or `gemini`
and a provider credential runs through the real job path (RQ on the real Redis, claims and commits on the
real database; `inprocess.drain`) against a local fake of each API (tests/support/native_llm_server.py):
the request each API expects, a tool round, usage with cache tokens, cost, and errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.* functions in this process
from tests.conftest import chain
from tests.support.native_llm_server import NativeLLMServer
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.engine import native_providers, outbound
from workflows.models import Credential, StepRun, WorkflowInstance
from workflows.scheduler import inprocess

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "sk-native-test-key-0123456789"
TOOLS = [{"name": "lookup", "description": "look it up", "parameters": {"type": "object"},
          "target": {"type": "python", "function": "tests.echo"}}]
PRICES = {"claude-test": {"prompt_per_1k": 3.0, "completion_per_1k": 15.0, "cache_read_per_1k": 0.3,
                          "cache_write_per_1k": 3.75}}


@pytest.fixture
def engine_settings(settings: Any) -> Iterator[None]:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "HTTP_ALLOWLIST": ["127.0.0.1"], "LLM_PRICES": PRICES}
    runtime.engine_config.cache_clear()
    yield
    runtime.engine_config.cache_clear()


def credential(server: NativeLLMServer, base: str) -> None:
    row = Credential(name="native", kind="llm_provider", base_url=server.url + base)
    row.set_value(KEY)
    row.save()


def run(provider: str, model: str, slug: str, **config: Any) -> WorkflowInstance:
    node = {"id": "ask", "type": "llm", "config": {"provider": provider, "credential": "native", "model": model,
                                                   "system": "be brief", "prompt": "what is 2+2?", **config}}
    instance = runtime.start_instance(save_version(slug, chain(node)), {})
    for _ in range(6):
        inprocess.drain()
        instance.refresh_from_db()
        if instance.status in ("completed", "failed", "halted"):
            break
    return instance


def test_anthropic_with_a_tool_round_usage_cache_tokens_and_cost(redis_conn, engine_settings) -> None:
    replies = [{"text": "Let me check.", "tool_calls": [{"id": "toolu_1", "name": "lookup", "args": {"q": "2+2"}}],
                "usage": {"input": 100, "output": 10, "cache_read": 1000, "cache_write": 0}},
               {"text": "4", "usage": {"input": 150, "output": 2, "cache_write": 200}}]
    with NativeLLMServer(replies) as server:
        credential(server, "/v1")
        instance = run("anthropic", "claude-test", "native-anthropic", tools=TOOLS, max_tokens=64)
    assert instance.status == "completed", instance.error
    first, second = server.requests
    assert first["path"] == "/v1/messages"
    assert first["headers"]["x-api-key"] == KEY and first["headers"]["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in first["headers"]
    assert first["body"]["system"] == "be brief" and first["body"]["max_tokens"] == 64
    assert first["body"]["messages"] == [{"role": "user", "content": "what is 2+2?"}]
    assert first["body"]["tools"] == [{"name": "lookup", "description": "look it up",
                                       "input_schema": {"type": "object"}}]
    assistant, results = second["body"]["messages"][1:]
    assert assistant == {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "2+2"}}]}
    assert results["role"] == "user" and results["content"][0]["type"] == "tool_result"
    assert results["content"][0]["tool_use_id"] == "toolu_1"

    step = StepRun.objects.get(instance=instance, node_id="ask")
    assert step.output["text"] == "4" and step.output["tool_calls"][0]["result"] is not None
    # prompt tokens count cache reads and writes; each priced as the price list says.
    assert step.usage["prompt_tokens"] == (100 + 1000) + (150 + 200)
    assert step.usage["completion_tokens"] == 12
    expected = ((100 * 3.0 + 1000 * 0.3 + 10 * 15.0) + (150 * 3.0 + 200 * 3.75 + 2 * 15.0)) / 1000
    assert step.usage["cost_usd"] == pytest.approx(expected)
    assert float(instance.cost_usd) == pytest.approx(expected)
    assert KEY not in str(list(instance.events.values_list("payload", flat=True)))


def test_gemini_with_a_tool_round(redis_conn, engine_settings) -> None:
    replies = [{"tool_calls": [{"id": None, "name": "lookup", "args": {"q": "x"}}],
                "usage": {"input": 20, "output": 3}},
               {"text": "four", "usage": {"input": 30, "output": 1, "cache_read": 10}}]
    with NativeLLMServer(replies) as server:
        credential(server, "/v1beta")
        instance = run("gemini", "gemini-test", "native-gemini", tools=TOOLS, temperature=0.5)
    assert instance.status == "completed", instance.error
    first, second = server.requests
    assert first["path"] == "/v1beta/models/gemini-test:generateContent"
    assert first["headers"]["x-goog-api-key"] == KEY
    assert first["body"]["systemInstruction"] == {"parts": [{"text": "be brief"}]}
    assert first["body"]["contents"] == [{"role": "user", "parts": [{"text": "what is 2+2?"}]}]
    assert first["body"]["generationConfig"] == {"temperature": 0.5}
    assert first["body"]["tools"][0]["functionDeclarations"][0]["name"] == "lookup"
    model_turn, answer = second["body"]["contents"][1:]
    assert model_turn == {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {"q": "x"}}}]}
    assert answer["parts"][0]["functionResponse"]["name"] == "lookup"
    step = StepRun.objects.get(instance=instance, node_id="ask")
    assert step.output["text"] == "four"
    assert (step.usage["prompt_tokens"], step.usage["completion_tokens"]) == (50, 4)


def test_errors_are_step_errors_and_the_key_never_shows(redis_conn, engine_settings) -> None:
    with NativeLLMServer([{"text": "x"}], status=400) as server:
        credential(server, "/v1")
        instance = run("anthropic", "claude-test", "native-400")
    assert instance.status == "failed"
    assert "HTTP 400" in str(instance.error) and KEY not in str(instance.error)

    bad = run("gemini", "../../admin", "native-bad-model")
    assert bad.status == "failed" and "not a valid model name" in str(bad.error)

    Credential.objects.all().delete()
    node = {"id": "ask", "type": "llm", "config": {"provider": "anthropic", "model": "claude-test", "prompt": "x"}}
    instance = runtime.start_instance(save_version("native-no-credential", chain(node)), {})
    inprocess.drain()
    instance.refresh_from_db()
    assert instance.status == "failed" and "needs a provider credential" in str(instance.error)


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_streamed_replies_tell_the_text_as_it_arrives(provider: str) -> None:
    reply = {"text": "streaming works", "tool_calls": [{"id": "t1", "name": "lookup", "args": {"q": "s"}}],
             "usage": {"input": 7, "output": 5, "cache_read": 2}}
    seen: list[str] = []
    chat = native_providers.anthropic_chat if provider == "anthropic" else native_providers.gemini_chat

    async def call(url: str) -> Any:
        try:
            return await chat(base_url=url, api_key=KEY, model="m-1", messages=[{"role": "user", "content": "hi"}],
                              tools=[], timeout_s=10, limit=4, extra={}, policy=outbound.Policy(trusted=True),
                              on_text=seen.append)
        finally:
            await outbound.close_pools()

    with NativeLLMServer([reply]) as server:
        answer = asyncio.run(call(server.url))
    assert server.requests[0]["body"].get("stream") is (True if provider == "anthropic" else None)
    assert answer.text == "streaming works" and seen[-1] == "streaming works" and len(seen) > 2
    assert [(c["name"], c["args"]) for c in answer.tool_calls] == [("lookup", {"q": "s"})]
    assert answer.usage["completion_tokens"] == 5 and answer.usage["cache_read_tokens"] == 2
