"""Partial llm replies for the live view: coalesced, published, never stored.

A streaming llm node (`stream: true`; workflows/engine/llm_stream.py) calls `StepCall.on_partial`
with the reply so far after every chunk. The ai consumer gives it a `PartialThrottle`, which
publishes at most one message per INTERVAL_S per step (the latest text; a chunk arriving inside
the interval is sent when it ends), on the live publisher's connection (workflows/live/notices.py) and its
own Redis channel. The web relay (dashboard/live/relay.py) passes each to the sockets watching the
instance as a `partial` message. No event row, no step write: when the step commits, its
step_succeeded event carries the whole output and the page drops the partial text.

A lost message is not re-sent (the next one carries the whole text so far, and the committed
output replaces it all), so nothing here waits for Redis or raises.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from workflows.live import notices as live

INTERVAL_S = 0.15  # at most one partial message per step this often
MAX_CHARS = 20_000  # the tail of a longer reply is what is sent (the page shows the end growing)


def encode(instance_id: int, step_id: int, node_id: str, text: str) -> bytes:
    shown = text if len(text) <= MAX_CHARS else "…" + text[-MAX_CHARS:]
    return json.dumps({"instance": instance_id, "step": step_id, "node": node_id, "text": shown,
                       "chars": len(text)}).encode()


def decode(data: bytes) -> dict[str, Any]:
    """A partial message as sent to the sockets; ValueError when it is not one."""
    message = json.loads(data)
    if not (isinstance(message, dict) and isinstance(message.get("instance"), int)
            and isinstance(message.get("step"), int) and isinstance(message.get("text"), str)):
        raise ValueError("not a partial reply")
    return {"instance": message["instance"], "step": message["step"], "node": str(message.get("node") or ""),
            "text": message["text"], "chars": int(message.get("chars") or len(message["text"]))}


class PartialThrottle:
    """`on_partial` for one step attempt, on the event loop that runs the handler."""

    def __init__(self, instance_id: int, step_id: int, node_id: str, *,
                 send: Callable[[bytes], None] = live.publish_partial,
                 clock: Callable[[], float] = time.monotonic,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.instance_id, self.step_id, self.node_id = instance_id, step_id, node_id
        self._send = send
        self._clock = clock
        self._loop = loop
        self._last_sent = float("-inf")
        self._pending: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.sent = 0
        self.closed = False

    def __call__(self, text: str) -> None:
        if self.closed:
            return
        self._pending = text
        wait = self._last_sent + INTERVAL_S - self._clock()
        if wait <= 0:
            self.flush()
        elif self._timer is None:
            loop = self._loop or asyncio.get_running_loop()
            self._timer = loop.call_later(wait, self.flush)

    def flush(self) -> None:
        self._timer = None
        text, self._pending = self._pending, None
        if text is None or self.closed:
            return
        self._last_sent = self._clock()
        self.sent += 1
        self._send(encode(self.instance_id, self.step_id, self.node_id, text))

    def close(self) -> None:
        """The attempt ended: what is still pending is dropped (the committed output supersedes it)."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def attach(call: Any, instance_id: int, step_id: int) -> PartialThrottle | None:
    """Give a streaming llm node's call its throttle (None for every other node)."""
    if call.node.type != "llm" or not call.config.get("stream"):
        return None
    throttle = PartialThrottle(instance_id, step_id, call.node.id)
    call.on_partial = throttle
    return throttle
