"""Helpers for the WebSocket tests (test_consumers.py, test_live_relay.py): a logged-in socket's
headers, running a coroutine from a test, reading events off a socket, counting the relay's
subscriptions on Redis."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from workflows.live import notices as live

ORIGIN = (b"origin", b"http://localhost")
GRAPH = {
    "nodes": [{"id": "start", "type": "start"}, {"id": "work", "type": "python", "config": {"function": "noop"}},
              {"id": "end", "type": "end"}],
    "edges": [{"source": "start", "target": "work"}, {"source": "work", "target": "end"}],
}


def session_headers(user: Any) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [ORIGIN, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


def run(coro: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(coro)()


def subscribers() -> int:
    """How many connections listen to the workers' notices (this test's Redis database's channel)."""
    from django_rq import get_connection

    conn = get_connection("default")
    channel = live.channel_for(conn.connection_pool)
    return int(dict(conn.pubsub_numsub(channel))[channel.encode()])


async def receive_until(comm: WebsocketCommunicator, last_type: str) -> list[dict[str, Any]]:
    """The events the socket sends, up to and including the first of type `last_type`."""
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["type"] != last_type:
        message = await comm.receive_json_from(timeout=5)
        assert message["type"] == "event", message
        seen.append(message["event"])
    return seen
