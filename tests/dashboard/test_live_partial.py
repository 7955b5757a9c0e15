"""The relay passes a streaming step's partial reply to the sockets watching its instance only, after
their hello, as a `partial` message (dashboard/live/relay.py, workflows/live/partial.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from dashboard.live.relay import Relay
from workflows.live import partial as live_partial


class Socket:
    def __init__(self, sent_seq: int | None) -> None:
        self.sent_seq = sent_seq
        self.partials: list[dict[str, Any]] = []

    async def send_events(self, events: list[dict[str, Any]]) -> None:
        raise AssertionError("a partial reply is not an event")

    async def send_partial(self, message: dict[str, Any]) -> None:
        self.partials.append(message)


def test_partials_go_to_the_instances_watchers_after_their_hello() -> None:
    async def go() -> tuple[Socket, Socket, Socket]:
        relay = Relay()
        watching, greeting, other = Socket(3), Socket(None), Socket(0)
        relay.watchers = {7: {watching, greeting}, 8: {other}}
        await relay.partial(live_partial.encode(7, 70, "ask", "Hello wor"))
        await relay.partial(b"not json")  # ignored, logged
        return watching, greeting, other

    watching, greeting, other = asyncio.run(go())
    assert watching.partials == [{"instance": 7, "step": 70, "node": "ask", "text": "Hello wor", "chars": 9}]
    assert greeting.partials == [] and other.partials == []
