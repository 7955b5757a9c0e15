"""Streaming llm steps through the `ai` consumer: partial replies are published coalesced on Redis
(workflows/live/partial.py), never stored (no event row, no step write), and the committed output
is the whole reply."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.conftest import chain
from tests.workflows.support import expect_status
from tests.workflows.test_aiworker import start_ai
from workflows import runtime
from workflows.live import notices as live
from workflows.live import partial as live_partial
from workflows.models import Event, StepRun

# The events of an llm step that does not stream: streaming adds none.
STEP_EVENTS = ["step_queued", "step_started", "step_succeeded"]
TEXT = " ".join(f"word{i}" for i in range(60))  # 60 chunks of one word and a space


def streaming_llm(**entry: Any) -> dict[str, Any]:
    return {"id": "ask", "type": "llm", "config": {
        "provider": "scripted", "prompt": "x", "stream": True,
        "script": [{"text": TEXT, "chunk_chars": len("word10 "), **entry}]}}


class Listener:
    """Every partial message published on the test's Redis database, heard from a thread."""

    def __init__(self, conn: Any) -> None:
        self.pubsub = conn.pubsub(ignore_subscribe_messages=True)
        self.pubsub.subscribe(live.partial_channel_for(conn.connection_pool))
        self.messages: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for message in self.pubsub.listen():
            if message.get("type") == "message":
                self.messages.append(live_partial.decode(message["data"]))

    def close(self) -> None:
        self.pubsub.unsubscribe()
        self.thread.join(5)


@pytest.mark.django_db(transaction=True)
def test_partials_are_coalesced_published_and_never_stored(processes: Any, redis_conn: Any,
                                                           make_version: Any) -> None:
    version = make_version(chain(streaming_llm(chunk_delay_s=0.01)))
    listener = Listener(redis_conn)
    try:
        instance = runtime.start_instance(version, {})
        start_ai(processes)
        expect_status(instance, "completed")
    finally:
        listener.close()
    step = StepRun.objects.get(instance=instance, node_id="ask")
    assert step.output["text"] == TEXT  # the whole reply, committed once
    messages = listener.messages
    assert messages, "no partial reply was published"
    # Coalesced: far fewer messages than the 60 chunks (one per 150 ms at most; the chunks come 10 ms apart).
    assert len(messages) <= 60 // 3, f"{len(messages)} partial messages for 60 chunks"
    assert all(m["instance"] == instance.pk and m["step"] == step.pk and m["node"] == "ask" for m in messages)
    assert all(TEXT.startswith(m["text"]) for m in messages)
    assert [m["chars"] for m in messages] == sorted(m["chars"] for m in messages)
    # Not stored: the events are those of a step that does not stream, and none holds a partial text.
    kinds = [e.type for e in Event.objects.filter(instance=instance, node_id="ask").order_by("seq")]
    assert kinds == STEP_EVENTS
    stored = json.dumps([e.as_message() for e in Event.objects.filter(instance=instance)])
    assert all(m["text"] not in stored for m in messages if m["text"] != TEXT)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Loop:
    """Just enough of an event loop for the throttle's one timer."""

    def __init__(self) -> None:
        self.timers: list[tuple[float, Any]] = []

    def call_later(self, delay: float, fn: Any) -> Any:
        entry = (delay, fn)
        self.timers.append(entry)

        class Handle:
            def cancel(self_inner) -> None:  # noqa: N805 - a stand-in
                if entry in self.timers:
                    self.timers.remove(entry)

        return Handle()


def test_the_throttle_sends_at_most_one_message_per_interval_and_the_latest_text() -> None:
    sent: list[dict[str, Any]] = []
    clock, loop = Clock(), Loop()
    throttle = live_partial.PartialThrottle(5, 9, "ask", send=lambda data: sent.append(live_partial.decode(data)),
                                            clock=clock, loop=loop)  # type: ignore[arg-type]
    throttle("a")  # the first goes at once
    for i, text in enumerate(("ab", "abc", "abcd")):
        clock.now = 0.01 * (i + 1)
        throttle(text)  # inside the interval: one timer, the latest text
    assert [m["text"] for m in sent] == ["a"] and len(loop.timers) == 1
    clock.now = live_partial.INTERVAL_S
    loop.timers.pop()[1]()
    assert [m["text"] for m in sent] == ["a", "abcd"]
    clock.now += 0.01
    throttle("abcde")
    throttle.close()  # the step ended: the pending text is dropped, the timer cancelled
    assert loop.timers == [] and len(sent) == 2
    throttle("abcdef")
    assert len(sent) == 2
    long = live_partial.decode(live_partial.encode(1, 2, "n", "x" * (live_partial.MAX_CHARS + 10)))
    assert long["chars"] == live_partial.MAX_CHARS + 10 and len(long["text"]) == live_partial.MAX_CHARS + 1
