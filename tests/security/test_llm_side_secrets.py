"""Issue 19, item 5: values on the LLM side of a step go through the same secret scrubbing as a step's
output: a tool round (the calls' arguments and errors, the tool steps' stored input, the
`step_waiting` event), tool outputs, the partial text streamed to live viewers, and the response
cache's stored replies. The model is an untrusted party: it may echo a secret its prompt carried.

In-process (the captured-jobs fixture of tests/runtime): each step is run here, then every row the
run wrote is searched for the planted value."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

import tests.workflows.functions  # noqa: F401 - registers tests.echo
from tests.conftest import chain
from tests.engine.conftest import make_call
from workflows import runtime
from workflows.engine.functions import FunctionCall, FunctionResult, register_function
from workflows.engine.nodes import get_kind
from workflows.engine.secrets import SecretScope
from workflows.models import Credential, Event, LLMCacheEntry, StepRun
from workflows.workers import dispatch

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "canary-llmside-5c1e0a9d7b"  # noqa: S105 - a planted test value
PROMPT = "Use {{ secrets.crm_token }} to look things up"
TOOL = {"name": "echo", "parameters": {"type": "object"}, "target": {"type": "python", "function": "tests.echo"}}


@register_function("tests.security.leak_secret")
def leak_secret(call: FunctionCall) -> FunctionResult:
    """A tool whose answer carries the secret (a lookup service echoing what it was sent)."""
    return FunctionResult(output={"found": f"token is {SECRET}"})


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    sent: list[tuple[int, str]] = []

    def capture(items: list[tuple[int, str]], **options: object) -> int:
        sent.extend(items)
        return len(items)

    monkeypatch.setattr(dispatch, "enqueue_steps", capture)
    return sent


@pytest.fixture(autouse=True)
def planted(db: None) -> Iterator[None]:
    credential = Credential(name="crm_token")
    credential.set_value(SECRET)
    credential.save()
    yield


def everything(instance_id: int) -> str:
    steps = StepRun.objects.filter(instance_id=instance_id).values_list("input", "output", "error")
    events = Event.objects.filter(instance_id=instance_id).values_list("payload", flat=True)
    cached = LLMCacheEntry.objects.values_list("output", flat=True)
    return repr([*steps, *events, *cached])


def run_all(jobs: list[tuple[int, str]]) -> None:
    while jobs:
        runtime.run_step(jobs.pop(0)[0], "w")


def test_a_tool_round_that_echoes_a_secret_is_scrubbed_everywhere(make_version: Any, jobs: Any) -> None:
    # The model echoes the secret its prompt carried: in a call's arguments, and as an unknown tool's
    # name (whose error names it).
    ask = {"text": f"looking up {SECRET}", "tool_calls": [
        {"id": "c1", "name": "echo", "args": {"q": SECRET, "note": f"key={SECRET}"}},
        {"id": "c2", "name": SECRET, "args": {}}]}
    agent = {"id": "agent", "type": "llm", "retry": {"max_attempts": 2, "backoff_s": 0},
             "config": {"provider": "scripted", "prompt": PROMPT, "tools": [TOOL],
                        "script": [ask, {"text": "done"}]}}
    instance = runtime.start_instance(make_version(chain(agent)), {})
    runtime.run_step(jobs.pop(0)[0], "w")  # the round
    tool_step = StepRun.objects.get(instance_id=instance.pk, node_id__startswith="tool:")
    assert tool_step.input["args"]["q"] == "[redacted]"
    waiting = Event.objects.get(instance_id=instance.pk, type="step_waiting").payload
    assert SECRET not in repr(waiting) and "unknown tool" in repr(waiting)
    assert SECRET not in everything(instance.pk)
    run_all(jobs)
    instance.refresh_from_db()
    assert instance.status == "completed", instance.error
    output = StepRun.objects.get(instance_id=instance.pk, node_id="agent").output
    # The round recorded with the ids of its steps (the stored round is the one the steps were made from).
    assert output["tool_calls"][0]["result"]["q"] == "[redacted]"
    assert SECRET not in everything(instance.pk)


def test_a_tool_step_output_is_scrubbed_of_its_llm_nodes_secrets(make_version: Any, jobs: Any) -> None:
    # The tool (an http target would do the same) returns the secret: the python function here is
    # handed it in its config's literal args, as a lookup service could echo it back.
    tool = {"name": "leak", "parameters": {"type": "object"},
            "target": {"type": "python", "function": "tests.security.leak_secret"}}
    agent = {"id": "agent", "type": "llm",
             "config": {"provider": "scripted", "prompt": PROMPT, "tools": [tool],
                        "script": [{"tool_calls": [{"id": "c1", "name": "leak", "args": {}}]}, {"text": "ok"}]}}
    instance = runtime.start_instance(make_version(chain(agent)), {})
    run_all(jobs)
    instance.refresh_from_db()
    assert instance.status == "completed", instance.error
    assert "token is [redacted]" in everything(instance.pk)
    assert SECRET not in everything(instance.pk)


def test_cached_replies_are_stored_scrubbed(make_version: Any, jobs: Any) -> None:
    agent = {"id": "agent", "type": "llm",
             "config": {"provider": "scripted", "prompt": PROMPT, "cache": {"ttl_s": 600},
                        "script": [{"text": f"your key is {SECRET}"}]}}
    instance = runtime.start_instance(make_version(chain(agent)), {})
    run_all(jobs)
    instance.refresh_from_db()
    assert instance.status == "completed", instance.error
    stored = list(LLMCacheEntry.objects.values_list("output", flat=True))
    assert len(stored) == 1 and "your key is [redacted]" in repr(stored)
    assert SECRET not in everything(instance.pk)


def test_streamed_partial_text_is_scrubbed_and_never_shows_part_of_a_secret() -> None:
    partials: list[str] = []
    script = [{"text": f"the key: {SECRET} (keep it)", "chunk_chars": 3}]
    call = make_call("llm", {"provider": "scripted", "prompt": "p", "script": script, "stream": True})
    call = dataclasses.replace(call, on_partial=partials.append, secrets=SecretScope({"crm_token": SECRET}))
    result = asyncio.run(get_kind("llm").arun(call))
    assert partials, "nothing streamed"
    assert partials[-1] == "the key: [redacted] (keep it)"
    # No partial shows the secret, nor a piece of it at the end of the text so far.
    for text in partials:
        assert SECRET not in text
        assert not any(text.endswith(SECRET[:n]) for n in range(3, len(SECRET))), text
    assert SECRET in result.output["text"]  # the output is scrubbed where every output is (finishing)
