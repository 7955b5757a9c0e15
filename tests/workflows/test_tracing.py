"""OpenTelemetry spans (workflows/observability/tracing.py), collected with the SDK's in-memory exporter: a workflow
runs through the real job path in this process (RQ queues on the real Redis, claims and commits on
the real database; `workflows.scheduler.inprocess.drain`), and the spans it leaves are checked for their ids,
parents and attributes, and against the traceparent the http node sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.* functions in this process
from tests.conftest import chain
from tests.workflows.support import py
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.observability import tracing
from workflows.runtime import observe
from workflows.scheduler import inprocess


class Receiver(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Receiver.seen.append(self.headers.get("traceparent", ""))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver(settings: Any) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    Receiver.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.STEADYFLOW = {**settings.STEADYFLOW, "HTTP_ALLOWLIST": ["127.0.0.1"]}
    runtime.engine_config.cache_clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    runtime.engine_config.cache_clear()


@pytest.fixture
def spans() -> Iterator[Any]:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracing.setup(exporter, batch=False)
    yield exporter
    tracing.shutdown()


def hex_id(value: int, width: int) -> str:
    return format(value, f"0{width}x")


@pytest.mark.django_db(transaction=True)
def test_a_span_per_instance_and_step_with_the_traceparent_the_http_node_sent(redis_conn, receiver, spans):
    llm = {"id": "ask", "type": "llm", "config": {"provider": "scripted", "prompt": "x", "script": [
        {"text": "hi", "usage": {"prompt_tokens": 7, "completion_tokens": 5, "cost_usd": 0.25}}]}}
    fetch = {"id": "fetch", "type": "http", "config": {"method": "GET", "url": receiver + "/thing"}}
    version = save_version("traced", chain(py("first", "tests.echo", args={"n": 1}), fetch, llm))
    instance = runtime.start_instance(version, {})
    inprocess.drain()
    inprocess.drain()  # the llm step is queued on ai after the http step commits
    instance.refresh_from_db()
    assert instance.status == "completed"

    trace_hex, instance_span_hex = observe.trace_parts(instance.trace_id)
    finished = spans.get_finished_spans()
    by_name = {span.name: span for span in finished}
    assert set(by_name) == {"step first", "step fetch", "step ask", f"instance {instance.pk}"}
    assert {hex_id(span.context.trace_id, 32) for span in finished} == {trace_hex}

    root = by_name[f"instance {instance.pk}"]
    assert root.parent is None and hex_id(root.context.span_id, 16) == instance_span_hex
    assert root.attributes["steadyflow.instance.outcome"] == "completed"
    assert root.attributes["steadyflow.llm.tokens"] == 12

    for name in ("step first", "step fetch", "step ask"):
        span = by_name[name]
        assert span.parent is not None and span.parent.span_id == root.context.span_id, name
        assert span.attributes["steadyflow.step.attempt"] == 1
        assert span.attributes["steadyflow.step.outcome"] == "succeeded"
        assert span.start_time <= span.end_time
    assert by_name["step fetch"].attributes["steadyflow.node.type"] == "http"
    ask = by_name["step ask"].attributes
    assert (ask["steadyflow.node.type"], ask["steadyflow.llm.tokens"], ask["steadyflow.llm.cost_usd"]) == (
        "llm", 12, 0.25)

    # The http node's traceparent names the step's own span: the receiver's spans hang under it.
    fetch_span = by_name["step fetch"]
    assert Receiver.seen == [f"00-{trace_hex}-{hex_id(fetch_span.context.span_id, 16)}-01"]


@pytest.mark.django_db(transaction=True)
def test_a_failed_attempt_is_an_error_span_and_its_retry_a_span_of_its_own(redis_conn, spans):
    flaky = py("flaky", "tests.fail_times", args={"failures": 1},
               retry={"max_attempts": 2, "backoff_s": 0})
    version = save_version("traced-retry", chain(flaky))
    instance = runtime.start_instance(version, {})
    inprocess.drain()
    inprocess.drain()  # the retry, made due by the next tick
    instance.refresh_from_db()
    assert instance.status == "completed"
    steps = [span for span in spans.get_finished_spans() if span.name == "step flaky"]
    assert [(s.attributes["steadyflow.step.attempt"], s.attributes["steadyflow.step.outcome"]) for s in steps] == [
        (1, "retrying"), (2, "succeeded")]
    assert steps[0].status.status_code.name == "ERROR" and steps[1].status.status_code.name == "UNSET"
    assert steps[0].context.span_id != steps[1].context.span_id


@pytest.mark.django_db(transaction=True)
def test_the_llm_node_sends_its_steps_traceparent(redis_conn, settings, spans):
    from tests.support.llm_server import LLMTestServer

    with LLMTestServer() as server:
        settings.STEADYFLOW = {**settings.STEADYFLOW, "LLM_BASE_URL": server.url}
        runtime.engine_config.cache_clear()
        try:
            version = save_version("traced-llm", chain({"id": "ask", "type": "llm",
                                                        "config": {"provider": "openai", "prompt": "hi"}}))
            instance = runtime.start_instance(version, {})
            inprocess.drain()
        finally:
            runtime.engine_config.cache_clear()
        instance.refresh_from_db()
        assert instance.status == "completed", instance.error
        (ask,) = [span for span in spans.get_finished_spans() if span.name == "step ask"]
        trace_hex, _ = observe.trace_parts(instance.trace_id)
        assert [r["traceparent"] for r in server.requests] == [
            f"00-{trace_hex}-{hex_id(ask.context.span_id, 16)}-01"]


def test_nothing_of_opentelemetry_is_recorded_without_setup() -> None:
    assert tracing.record_spans not in observe.observers


CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def _api_client(path_kind: str) -> Any:
    """A superuser's client: a v1 token or the old API's session."""
    from django.contrib.auth.models import User
    from django.test import Client

    from dashboard.security import tokens

    user = User.objects.create_superuser(f"tracer-{path_kind}", password=None)
    if path_kind == "v1":
        return Client(HTTP_AUTHORIZATION="Bearer " + tokens.issue(user, "t", ["run", "read"]).plaintext)
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("kind", "path", "body"), [
    ("v1", "/api/v1/workflows/joined/instances", {"input": {}}),
    ("v1", "/api/v1/workflows/joined/instances/bulk", {"inputs": [{}, {}]}),
    ("old", "/api/workflows/joined/instances", {"input": {}}),
    ("old", "/api/workflows/joined/instances/bulk", {"inputs": [{}]}),
])
def test_a_start_with_a_traceparent_joins_the_callers_trace(redis_conn, spans, kind, path, body):
    """The instance's spans carry the caller's trace id; the instance span's parent is the caller's span,
    and each step's span hangs under the instance span."""
    save_version("joined", chain(py("first", "tests.echo", args={"n": 1})))
    response = _api_client(kind).post(path, body, content_type="application/json",
                                      HTTP_TRACEPARENT=f"00-{CALLER_TRACE}-{CALLER_SPAN}-01")
    assert response.status_code in (200, 201), response.content[:300]
    answer = response.json()
    started = answer.get("instances") or [answer.get("instance", answer)]
    inprocess.drain()
    finished = spans.get_finished_spans()
    assert finished and {hex_id(span.context.trace_id, 32) for span in finished} == {CALLER_TRACE}
    for shown in started:
        trace_hex, instance_span_hex = observe.trace_parts(shown["trace_id"])
        assert trace_hex == CALLER_TRACE and instance_span_hex != CALLER_SPAN
        (root,) = [span for span in finished if span.name == f"instance {shown['id']}"]
        assert hex_id(root.context.span_id, 16) == instance_span_hex
        assert root.parent is not None and hex_id(root.parent.span_id, 16) == CALLER_SPAN and root.parent.is_remote
        steps = [span for span in finished if span.attributes.get("steadyflow.instance.id") == shown["id"]
                 and span.name.startswith("step ")]
        assert steps and all(span.parent.span_id == root.context.span_id for span in steps)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("header", [
    "garbage", f"00-{'0' * 32}-{CALLER_SPAN}-01", f"00-{CALLER_TRACE}-{'0' * 16}-01",
    f"ff-{CALLER_TRACE}-{CALLER_SPAN}-01", f"00-{CALLER_TRACE.upper()}-{CALLER_SPAN}-01",
    f"00-{CALLER_TRACE}-{CALLER_SPAN}-01-extra", "",
])
def test_an_invalid_traceparent_is_ignored(redis_conn, spans, header):
    save_version("alone", chain(py("first", "tests.echo", args={"n": 1})))
    response = _api_client("v1").post("/api/v1/workflows/alone/instances", {"input": {}},
                                      content_type="application/json", HTTP_TRACEPARENT=header)
    assert response.status_code == 201, response.content[:300]
    trace_hex, _ = observe.trace_parts(response.json()["trace_id"])
    assert trace_hex != CALLER_TRACE
    inprocess.drain()
    (root,) = [span for span in spans.get_finished_spans() if span.name.startswith("instance ")]
    assert root.parent is None and hex_id(root.context.trace_id, 32) == trace_hex


def test_incoming_trace_accepts_a_future_version_with_more_fields() -> None:
    assert observe.incoming_trace(f"01-{CALLER_TRACE}-{CALLER_SPAN}-01-more") == (CALLER_TRACE, CALLER_SPAN)
    assert observe.incoming_trace(None) is None


def run_agent_with_a_tool(slug: str) -> None:
    tools = [{"name": "lookup", "description": "look it up", "parameters": {"type": "object"},
              "target": {"type": "python", "function": "tests.echo"}}]
    script = [
        {"text": "", "usage": {"prompt_tokens": 11, "completion_tokens": 3},
         "tool_calls": [{"id": "call-1", "name": "lookup", "args": {"q": "otel"}}]},
        {"text": "the answer", "usage": {"prompt_tokens": 20, "completion_tokens": 4, "cost_usd": 0.01}}]
    agent = {"id": "agent", "type": "llm", "config": {
        "provider": "scripted", "model": "gpt-test", "system": "be brief", "prompt": "what is otel?",
        "tools": tools, "script": script}}
    instance = runtime.start_instance(save_version(slug, chain(agent)), {})
    for _ in range(6):
        inprocess.drain()
        instance.refresh_from_db()
        if instance.status == "completed":
            break
    assert instance.status == "completed", instance.error


@pytest.mark.django_db(transaction=True)
def test_llm_and_tool_spans_carry_the_genai_conventions_without_content_by_default(redis_conn, spans, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    run_agent_with_a_tool("genai-spans")
    finished = spans.get_finished_spans()
    calls = [dict(s.attributes) for s in finished if s.name == "step agent"]
    assert [(a["gen_ai.operation.name"], a["gen_ai.provider.name"], a["gen_ai.system"], a["gen_ai.request.model"],
             a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"],
             tuple(a["gen_ai.response.finish_reasons"])) for a in calls] == [
        ("chat", "scripted", "scripted", "gpt-test", 11, 3, ("tool_calls",)),
        ("chat", "scripted", "scripted", "gpt-test", 20, 4, ("stop",))]
    assert all("gen_ai.input.messages" not in a and "gen_ai.output.messages" not in a for a in calls)
    (tool,) = [s for s in finished if s.name == "step tool:agent:lookup"]
    assert tool.attributes["steadyflow.node.type"] == "tool"
    assert (tool.attributes["gen_ai.operation.name"], tool.attributes["gen_ai.tool.name"],
            tool.attributes["gen_ai.tool.call.id"]) == ("execute_tool", "lookup", "call-1")
    assert tool.parent is not None


@pytest.mark.django_db(transaction=True)
def test_prompts_and_completions_go_on_spans_only_when_the_setting_allows(redis_conn, spans, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    run_agent_with_a_tool("genai-content")
    last = [dict(s.attributes) for s in spans.get_finished_spans() if s.name == "step agent"][-1]
    assert json.loads(last["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
        {"role": "user", "parts": [{"type": "text", "content": "what is otel?"}]}]
    assert json.loads(last["gen_ai.output.messages"])[0]["parts"][0]["content"] == "the answer"
