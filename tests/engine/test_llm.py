"""The llm node: scripted provider, routing, usage and cost, the breaker gate, and the
OpenAI-compatible provider against a real local HTTP server."""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from typing import Any

import pytest

from tests.engine.conftest import LocalServer, Seen, json_reply, make_call
from workflows.engine import breaker, providers
from workflows.engine.errors import CircuitOpen, ConfigError, PermanentStepError, ProviderError, StepTimeout
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import EngineConfig, NodeResult, StepCall
from workflows.engine.nodes.llm import ROUTE_INSTRUCTION, _messages, _route_from_text

LLM = get_kind("llm")
SCRIPT = [{"text": "first", "route": "search", "usage": {"prompt_tokens": 1000, "completion_tokens": 500}},
          {"text": "second", "route": "answer"},
          {"text": "third", "route": "answer", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}]


def run(call: StepCall) -> NodeResult:
    """Run the node on a fresh event loop and close the provider sessions that loop opened."""

    async def go() -> NodeResult:
        try:
            return await LLM.arun(call)
        finally:
            await providers.close_sessions()

    return asyncio.run(go())


def scripted(script: list[dict[str, Any]], call_index: int = 0, **config: Any) -> StepCall:
    return make_call("llm", {"provider": "scripted", "prompt": "p", "script": script, **config},
                     call_index=call_index, node_id="ask")


# --- Scripted provider -----------------------------------------------------------------------------

def test_scripted_replies_come_in_order_and_the_last_repeats() -> None:
    texts = [run(scripted(SCRIPT, i, routes=["search", "answer"])).output["text"] for i in range(5)]
    assert texts == ["first", "second", "third", "third", "third"]


def test_scripted_output_shape() -> None:
    tool_calls = [{"name": "orders", "args": {"id": 42}}]
    result = run(scripted([{"text": "x", "route": "lookup", "tool_calls": tool_calls}], routes=["lookup"]))
    assert result.output == {"text": "x", "route": "lookup", "tool_calls": tool_calls,
                             "usage": {"model": "scripted", "prompt_tokens": 0, "completion_tokens": 0,
                                       "cost_usd": 0.0}}
    assert result.usage == result.output["usage"]
    assert result.context_updates == {} and not result.degraded


# --- The default provider ----------------------------------------------------------------------------

def test_a_node_naming_no_provider_gets_the_engines_default_scripted_unless_configured(
        local_server: LocalServer) -> None:
    # Left at its default, a node is answered by its script: no request leaves the process.
    call = make_call("llm", {"prompt": "p", "script": [{"text": "offline"}]}, node_id="ask",
                     engine=EngineConfig(llm_base_url=local_server.url("/v1/")))
    assert run(call).output["text"] == "offline"
    assert local_server.requests == []
    # Without a script it fails for good, saying why, instead of calling a paid API.
    with pytest.raises(ConfigError, match="names no provider and none is configured"):
        run(make_call("llm", {"prompt": "p"}, node_id="ask"))
    # Where the deployment configured an endpoint, the default is the OpenAI-compatible provider.
    local_server.routes["/v1/chat/completions"] = chat_reply("served")
    configured = EngineConfig(llm_base_url=local_server.url("/v1/"), llm_default_provider="openai")
    assert run(make_call("llm", {"prompt": "p"}, engine=configured)).output["text"] == "served"


def test_the_described_schema_carries_the_engines_default_provider() -> None:
    schema = LLM.describe(EngineConfig(llm_default_provider="openai"))["schema"]
    assert schema["properties"]["provider"]["default"] == "openai"
    assert LLM.config_schema["properties"]["provider"]["default"] == "scripted"  # unchanged
    assert LLM.describe()["schema"]["properties"]["provider"]["default"] == "scripted"


def test_scripted_error_entries_raise_provider_errors() -> None:
    script = [{"error": "rate limited"}, {"error": "bad request", "permanent": True}, {"text": "ok"}]
    with pytest.raises(ProviderError) as transient:
        run(scripted(script, 0))
    assert transient.value.message == "scripted provider error: rate limited"
    assert not transient.value.permanent
    with pytest.raises(ProviderError) as permanent:
        run(scripted(script, 1))
    assert permanent.value.permanent
    assert run(scripted(script, 2)).output["text"] == "ok"


def test_scripted_delay_is_awaited() -> None:
    assert run(scripted([{"text": "slowish", "delay_s": 0.01}])).output["text"] == "slowish"


def test_an_empty_script_is_a_permanent_error() -> None:
    with pytest.raises(PermanentStepError, match="empty script"):
        providers.scripted_reply([], 0)


def test_a_route_outside_the_routes_fails_the_step() -> None:
    with pytest.raises(ProviderError) as info:
        run(scripted([{"text": "hmm", "route": "maybe"}], routes=["yes", "no"]))
    assert info.value.message == "the model chose route 'maybe', not one of ['yes', 'no']"
    assert info.value.details == {"reply": "hmm"}
    assert not info.value.permanent  # retried per the node's policy
    with pytest.raises(ProviderError, match="route None"):
        run(scripted([{"text": "no route at all"}], routes=["yes", "no"]))


def test_without_routes_any_reply_is_fine() -> None:
    assert run(scripted([{"text": "free text"}])).output["route"] is None


def test_usage_and_cost_from_the_price_table() -> None:
    prices = {"gpt-x": {"prompt_per_1k": 0.5, "completion_per_1k": 1.5}, "*": {"prompt_per_1k": 0.01}}
    call = scripted(SCRIPT, 0, model="gpt-x")
    call.engine = EngineConfig(llm_prices=prices)
    usage = run(call).usage
    assert usage == {"model": "gpt-x", "prompt_tokens": 1000, "completion_tokens": 500,
                     "cost_usd": pytest.approx(0.5 + 0.75)}
    # A model without its own price takes the "*" row.
    call = scripted(SCRIPT, 0, model="other")
    call.engine = EngineConfig(llm_prices=prices)
    assert run(call).usage["cost_usd"] == pytest.approx(0.01)
    # No price known: free.
    assert run(scripted(SCRIPT, 0, model="other")).usage["cost_usd"] == 0


def test_a_cost_reported_by_the_provider_wins_over_the_table() -> None:
    call = scripted([{"text": "x", "usage": {"prompt_tokens": 1000, "cost_usd": 0.123456789}}], model="gpt-x")
    call.engine = EngineConfig(llm_prices={"gpt-x": {"prompt_per_1k": 100}})
    assert run(call).usage["cost_usd"] == 0.12345679


def test_save_as_stores_the_reply_in_the_context() -> None:
    result = run(scripted([{"text": "the answer"}], save_as="reply"))
    assert result.context_updates == {"reply": "the answer"}


# --- Routing from free text ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "route"), [
    ("search", "search"),
    ("  Search. ", "search"),
    ("ANSWER", "answer"),
    ("I think we should search the web", "search"),
    ("search or answer", None),  # ambiguous
    ("no idea", None),
    ("", None),
])
def test_route_from_text(text: str, route: str | None) -> None:
    assert _route_from_text(text, ["search", "answer"]) == route


def test_an_exact_match_wins_over_a_route_contained_in_another() -> None:
    assert _route_from_text("review", ["review", "pre_review"]) == "review"


def test_messages_carry_the_route_instruction() -> None:
    messages = _messages({"system": "Be brief.", "prompt": "Classify this"}, ["a", "b"])
    assert messages == [{"role": "system", "content": "Be brief.\n" + ROUTE_INSTRUCTION.format(routes="a, b")},
                        {"role": "user", "content": "Classify this"}]
    assert _messages({"prompt": "Hi"}, []) == [{"role": "user", "content": "Hi"}]


# --- The circuit breaker gate ----------------------------------------------------------------------

class MemoryGate:
    """The engine's breaker logic with its state in memory and a hand-moved clock."""

    def __init__(self, config: breaker.BreakerConfig) -> None:
        self.key = "scripted:test"
        self.config = config
        self.state = breaker.Breaker()
        self.now = 1000.0
        self.recorded: list[bool] = []
        self.released = 0

    def allow(self) -> bool:
        self.state, ok = breaker.allow(self.state, self.now, self.config)
        return ok

    def record(self, ok: bool) -> None:
        self.recorded.append(ok)
        self.state = breaker.record(self.state, ok, self.now, self.config)

    def release(self) -> None:
        self.released += 1
        self.state = breaker.release_trial(self.state)


def test_the_gate_counts_successes_and_failures() -> None:
    gate = MemoryGate(breaker.BreakerConfig(min_calls=3))
    script = [{"error": "down"}, {"text": "ok"}]
    call = scripted(script, 1)
    call.breaker = gate
    run(call)
    failing = scripted(script, 0)
    failing.breaker = gate
    with pytest.raises(ProviderError):
        run(failing)
    assert gate.recorded == [True, False]


def test_a_permanent_provider_error_fails_the_step_without_counting() -> None:
    """A request the provider refuses (HTTP 400: a bad model name) is the node's fault, not the
    provider's: it must not count towards opening the breaker every workflow shares."""
    gate = MemoryGate(breaker.BreakerConfig(min_calls=1))
    call = scripted([{"error": "bad request", "permanent": True}])
    call.breaker = gate
    with pytest.raises(ProviderError) as info:
        run(call)
    assert info.value.permanent
    assert gate.recorded == [] and gate.released == 1
    assert gate.state.state == breaker.CLOSED


def test_a_reply_with_an_unknown_route_still_counts_as_a_provider_success() -> None:
    gate = MemoryGate(breaker.BreakerConfig())
    call = scripted([{"route": "nope"}], routes=["yes"])
    call.breaker = gate
    with pytest.raises(ProviderError):
        run(call)
    assert gate.recorded == [True]


def open_gate() -> MemoryGate:
    gate = MemoryGate(breaker.BreakerConfig(min_calls=2, cooldown_s=30))
    gate.record(False)
    gate.record(False)
    assert gate.state.state == breaker.OPEN
    gate.recorded.clear()
    return gate


def test_an_open_breaker_takes_the_rule_fallback_without_calling() -> None:
    gate = open_gate()
    call = make_call("llm", {"provider": "scripted", "prompt": "p", "routes": ["answer", "search"],
                             "script": [{"error": "would fail"}]},
                     node_extra={"fallback": {"mode": "rule", "route": "answer", "output": "Sorry, later."}},
                     breaker=gate)
    result = run(call)
    assert result.degraded
    assert result.output == {"text": "Sorry, later.", "tool_calls": [], "fallback": True,
                             "breaker": "scripted:test", "route": "answer"}
    assert gate.recorded == []  # the provider was not called


def test_an_open_breaker_without_a_rule_fallback_halts_into_review() -> None:
    gate = open_gate()
    call = scripted([{"text": "x"}])
    call.breaker = gate
    with pytest.raises(CircuitOpen) as info:
        run(call)
    assert info.value.permanent
    assert info.value.details == {"breaker": "scripted:test"}
    assert "node 'ask' has no rule fallback" in info.value.message


def test_after_the_cool_down_one_trial_call_goes_through_and_closes_the_breaker() -> None:
    gate = open_gate()
    gate.now += 31
    call = scripted([{"text": "back"}])
    call.breaker = gate
    assert run(call).output["text"] == "back"
    assert gate.state.state == breaker.CLOSED


def test_the_synchronous_entry_point_runs_the_same_handler() -> None:
    assert LLM.run(scripted([{"text": "sync"}])).output["text"] == "sync"


# --- OpenAI-compatible provider, against a real local server ---------------------------------------

def chat_reply(content: str, usage: dict[str, int] | None = None) -> Any:
    def handler(req: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply({"model": "served-model", "usage": usage or {},
                           "choices": [{"message": {"role": "assistant", "content": content}}]})
    return handler


def openai_call(server: LocalServer, timeout_s: float | None = None, **config: Any) -> StepCall:
    engine = EngineConfig(llm_base_url=server.url("/v1/"), llm_api_key="sk-test", llm_max_per_provider=4,
                          llm_prices={"gpt-test": {"prompt_per_1k": 1, "completion_per_1k": 2}})
    return make_call("llm", {"provider": "openai", "prompt": "Where is order 42?", "model": "gpt-test", **config},
                     engine=engine,
                     node_extra={"timeout_s": timeout_s})


def test_openai_chat_request_and_reply(local_server: LocalServer) -> None:
    local_server.routes["/v1/chat/completions"] = chat_reply(
        "Search.", {"prompt_tokens": 200, "completion_tokens": 100})
    result = run(openai_call(local_server, routes=["search", "answer"], system="You route.", temperature=0.1,
                             max_tokens=5))
    assert result.output["text"] == "Search."
    assert result.output["route"] == "search"
    assert result.usage == {"model": "gpt-test", "prompt_tokens": 200, "completion_tokens": 100,
                            "cost_usd": pytest.approx(0.4)}
    (request,) = local_server.requests
    assert request.method == "POST"
    assert request.headers["authorization"] == ["Bearer sk-test"]
    payload = json.loads(request.body)
    assert payload == {
        "model": "gpt-test", "temperature": 0.1, "max_tokens": 5,
        "messages": [{"role": "system", "content": "You route.\n" + ROUTE_INSTRUCTION.format(routes="search, answer")},
                     {"role": "user", "content": "Where is order 42?"}],
    }


def test_openai_chat_tool_calls_are_passed_on(local_server: LocalServer) -> None:
    def handler(req: Seen) -> tuple[int, dict[str, str], bytes]:
        return json_reply({"choices": [{"message": {"content": None, "tool_calls": [
            {"type": "function", "function": {"name": "orders", "arguments": "{\"id\": 42}"}}]}}]})

    local_server.routes["/v1/chat/completions"] = handler
    result = run(openai_call(local_server))
    assert result.output["tool_calls"] == [{"id": None, "name": "orders", "args": "{\"id\": 42}"}]
    assert result.output["text"] is None


def test_openai_reply_naming_no_route_fails_the_step(local_server: LocalServer) -> None:
    local_server.routes["/v1/chat/completions"] = chat_reply("Perhaps both search and answer")
    with pytest.raises(ProviderError, match="the model chose route None"):
        run(openai_call(local_server, routes=["search", "answer"]))


@pytest.mark.parametrize(("status", "permanent"), [(500, False), (503, False), (429, False), (400, True),
                                                   (401, True)])
def test_openai_http_errors(local_server: LocalServer, status: int, permanent: bool) -> None:
    local_server.routes["/v1/chat/completions"] = lambda req: json_reply({"error": "nope"}, status)
    with pytest.raises(ProviderError) as info:
        run(openai_call(local_server))
    assert info.value.permanent is permanent
    assert info.value.details == {"status": status}
    assert info.value.message.startswith(f"LLM provider answered HTTP {status}")


def test_openai_reply_without_choices(local_server: LocalServer) -> None:
    local_server.routes["/v1/chat/completions"] = lambda req: json_reply({"choices": []})
    with pytest.raises(ProviderError, match="returned no choices"):
        run(openai_call(local_server))


def test_openai_timeout(local_server: LocalServer) -> None:
    local_server.routes["/v1/chat/completions"] = local_server.routes["/slow"]
    with pytest.raises(StepTimeout, match="LLM call timed out after 0.2 s"):
        run(openai_call(local_server, timeout_s=0.2))


def test_openai_unreachable_is_transient(local_server: LocalServer) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    call = openai_call(local_server)
    call.engine = EngineConfig(llm_base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderError, match="LLM provider unreachable") as info:
        run(call)
    assert not info.value.permanent


# --- The synchronous entry point's provider session --------------------------------------------------

def _open_sessions() -> int:
    import aiohttp

    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, aiohttp.ClientSession) and not obj.closed)


def _leaks(call: StepCall, *, alarm_s: float = 0) -> tuple[str, int, list[str]]:
    """Run the node through its synchronous entry point (an event loop of its own, as on a sync
    worker), optionally under the sync worker's SIGALRM time limit. Returns how it ended, the aiohttp
    sessions it left open and the resource warnings ("Unclosed client session") seen after a collection."""
    from workflows.runtime.timeouts import time_limit

    before = _open_sessions()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ended = "reply"
        try:
            if alarm_s:
                with time_limit(alarm_s, "step ask"):
                    LLM.run(call)
            else:
                LLM.run(call)
        except (ProviderError, StepTimeout) as exc:
            ended = type(exc).__name__
        left_open = _open_sessions() - before
    return ended, left_open, [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.parametrize(("path", "ended"), [("reply", "reply"), ("http_error", "ProviderError"),
                                            ("deadline", "StepTimeout"), ("time_limit", "StepTimeout"),
                                            ("unreachable", "ProviderError")])
def test_the_synchronous_entry_point_closes_its_provider_session(local_server: LocalServer, path: str,
                                                                 ended: str) -> None:
    """A sync worker's llm step runs on an event loop of its own: the aiohttp session that loop opened
    is closed before the loop ends, on success, on an error and on either timeout (the node's deadline,
    the worker's SIGALRM time limit)."""
    routes = local_server.routes
    routes["/v1/chat/completions"] = {
        "reply": chat_reply("hi"), "http_error": lambda req: json_reply({"error": "down"}, 503),
    }.get(path, routes["/slow"])
    call = openai_call(local_server, timeout_s=0.3 if path == "deadline" else None)
    if path == "unreachable":
        import socket

        with socket.socket() as sock:  # a port nothing listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        call.engine = EngineConfig(llm_base_url=f"http://127.0.0.1:{port}/v1")
    assert _leaks(call, alarm_s=0.3 if path == "time_limit" else 0) == (ended, 0, [])
