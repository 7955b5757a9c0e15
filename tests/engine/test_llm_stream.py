"""Streamed llm replies (workflows/engine/llm_stream.py): the OpenAI-compatible provider's SSE chunks
against tests/support/llm_server.py, the scripted provider's chunks, and the outbound guard's body cap
and total deadline applied to a stream."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from tests.engine.conftest import make_call
from tests.support.llm_server import LLMTestServer
from workflows.engine import outbound, providers
from workflows.engine.errors import ProviderError, StepTimeout
from workflows.engine.llm_stream import StreamParser, openai_chat_stream
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import EngineConfig, StepCall

LLM = get_kind("llm")
REPLY = "The quick brown fox jumps over the lazy dog."
T = TypeVar("T")


def on_loop(make: Callable[[], Awaitable[T]]) -> T:
    async def go() -> T:
        try:
            return await make()
        finally:
            await providers.close_sessions()

    return asyncio.run(go())


def stream(server: LLMTestServer, partials: list[str], timeout_s: float = 10.0) -> providers.LLMReply:
    return on_loop(lambda: openai_chat_stream(
        base_url=server.url, api_key="k", model="m", messages=[{"role": "user", "content": "hi"}],
        timeout_s=timeout_s, limit=10, on_text=partials.append, policy=outbound.Policy(trusted=True)))


def with_partials(call: StepCall, partials: list[str]) -> StepCall:
    return dataclasses.replace(call, on_partial=partials.append)


def test_the_provider_streams_sse_chunks_and_the_text_grows_to_the_whole_reply() -> None:
    partials: list[str] = []
    with LLMTestServer(reply=REPLY) as server:
        server.configure(stream_chunk_chars=5)
        reply = stream(server, partials)
        sent = server.requests[0]
    assert sent["body"]["stream"] is True and sent["chunks"] == 9
    assert reply.text == REPLY and reply.usage["completion_tokens"] == len(REPLY.split())
    assert len(partials) == 9 and partials[-1] == REPLY
    assert all(REPLY.startswith(p) and len(p) < len(q) for p, q in zip(partials, partials[1:], strict=False))


def test_an_llm_node_that_opts_in_streams_and_its_output_is_the_whole_reply() -> None:
    partials: list[str] = []
    with LLMTestServer(reply=REPLY) as server:
        engine = EngineConfig(llm_base_url=server.url, llm_default_provider="openai")
        streaming = make_call("llm", {"provider": "openai", "prompt": "p", "stream": True}, engine=engine)
        result = on_loop(lambda: LLM.arun(with_partials(streaming, partials)))
        plain = make_call("llm", {"provider": "openai", "prompt": "p"}, engine=engine)
        told = len(partials)
        unstreamed = on_loop(lambda: LLM.arun(with_partials(plain, partials)))
        bodies = [r["body"] for r in server.requests]
    assert result.output["text"] == REPLY and "stream" not in result.output
    assert bodies[0]["stream"] is True and "stream" not in bodies[1]
    assert partials[-1] == REPLY and len(partials) > 1
    assert unstreamed.output["text"] == REPLY and len(partials) == told  # not opted in: one plain call


def test_the_scripted_provider_streams_its_text_in_chunks() -> None:
    partials: list[str] = []
    script = [{"text": "abcdefghij", "chunk_chars": 3, "chunk_delay_s": 0.001}]
    call = make_call("llm", {"provider": "scripted", "prompt": "p", "script": script, "stream": True})
    result = on_loop(lambda: LLM.arun(with_partials(call, partials)))
    assert partials == ["abc", "abcdef", "abcdefghi", "abcdefghij"]
    assert result.output["text"] == "abcdefghij"
    # Without a partial sink (a synchronous worker, a test of the node in the editor) nothing streams.
    assert on_loop(lambda: LLM.arun(call)).output["text"] == "abcdefghij"


def test_the_body_cap_applies_to_a_stream() -> None:
    received: list[bytes] = []
    with LLMTestServer(reply="x" * 20_000) as server:
        server.configure(stream_chunk_chars=500, stream_delay=0.01)
        with pytest.raises(outbound.ResponseTooLarge):
            on_loop(lambda: outbound.arequest(
                "POST", server.url + "/chat/completions", json={"model": "m", "stream": True}, timeout_s=10,
                policy=outbound.Policy(trusted=True), pool=server.url, max_bytes=4_000, on_chunk=received.append))
    assert 0 < sum(map(len, received)) <= 4_000
    # At the provider's level it is a permanent provider error (the default cap: 5 MB).
    with LLMTestServer(reply="y" * (outbound.MAX_BODY_BYTES + 1)) as server:
        server.configure(stream_chunk_chars=1_000_000)
        with pytest.raises(ProviderError) as info:
            stream(server, [])
    assert info.value.permanent and "larger than" in info.value.message


def test_the_total_deadline_applies_to_a_stream_that_keeps_coming() -> None:
    partials: list[str] = []
    with LLMTestServer(reply="z" * 400) as server:
        server.configure(stream_chunk_chars=1, stream_delay=0.05)  # 20 s of chunks
        with pytest.raises(StepTimeout):
            stream(server, partials, timeout_s=1.0)
    assert 0 < len(partials) < 400


def test_provider_errors_are_not_streams() -> None:
    with LLMTestServer(status=503) as server, pytest.raises(ProviderError) as info:
        stream(server, [])
    assert "503" in info.value.message and not info.value.permanent


def test_the_parser_takes_chunks_split_anywhere_and_refuses_garbage() -> None:
    texts: list[str] = []
    parser = StreamParser(texts.append)
    name = b'{"name":"f","arguments":"{\\"a\\""}'
    wire = (b': keep-alive\n\ndata: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
            b'data: {"choices":[{"delta":{"content":"lo"}}],"model":"m1"}\r\n\r\n'
            b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":' + name + b'}]}}]}\n'
            b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}\n'
            b'data: [DONE]\n')
    for i in range(0, len(wire), 7):
        parser.feed(wire[i:i + 7])
    parser.close()
    assert texts == ["Hel", "Hello"] and parser.model == "m1" and parser.done
    assert parser.tool_calls == [{"name": "f", "args": '{"a":1}'}]
    with pytest.raises(ProviderError):
        StreamParser(texts.append).feed(b"data: {not json\n")
