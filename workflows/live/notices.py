"""Telling the live view that events were committed: one compact Redis PUBLISH per commit.

The worker side of the live view, kept off the hot path. After a commit, a worker says only *which*
instance advanced and to which sequence number; the web process reads the events themselves from the
event log (dashboard/live/relay.py) for the instances somebody is watching. So a worker neither builds
event dicts nor serialises them for the live view, and no asyncio loop or background thread runs in
it for this.

The cheapest call, after the commit of an instance's events `first_seq..last_seq`:

    live.publish_commit(instance_id, first_seq, last_seq)

one `PUBLISH steadyflow:<db>:live "<instance_id> <first_seq> <last_seq>"`, written on one redis-py
connection per process that has told Redis `CLIENT REPLY OFF`: the worker sends ~60 bytes with one
`sendall` and never waits for or parses a reply. About 5 µs of CPU here, against ~20 µs for a
PUBLISH that reads its reply and ~200 µs for the Channels group sends it replaces (docs/BENCHMARKS.md).
Thread-safe (the `ai` consumer commits from several threads) and fork-safe (a child reconnects).
`publish(messages)`, with the commit's `Event.as_message()` dicts, is the same call for callers that
already hold them; building those dicts costs more than the publish, so a caller that has the
numbers should call `publish_commit`. Call it once per commit and instance (a transaction that
commits events of several instances calls it once for each).

A lost publish is harmless: the relay also checks every watched instance's `event_seq` in the
database every second and sends what is missing, and the pages catch up from the event log by
sequence number. So a failure here is never raised to the caller, and while Redis is unreachable the
worker stops trying for RETRY_AFTER_S instead of paying a connection attempt per commit. (Without
replies a write into a connection Redis has just dropped can vanish unnoticed; the next one fails and
reconnects. That too is a lost notice, covered by the poll.)

Redis pub/sub channels are global to a server, not per database, so the channel name carries the
Redis database number: deployments (or test runs) sharing a server on different databases do not
hear each other.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import redis
from django.conf import settings

log = logging.getLogger("steadyflow.live")

# A publish that takes longer than this is abandoned (the relay's poll delivers the events instead).
SOCKET_TIMEOUT_S = 0.25
RETRY_AFTER_S = 1.0
CLIENT_NAME = "steadyflow-live-publisher"  # as CLIENT LIST shows it


def channel_for(pool: Any) -> str:
    """The notices' channel for a (sync or asyncio) redis-py connection pool of REDIS_URL."""
    return f"steadyflow:{int(pool.connection_kwargs.get('db') or 0)}:live"


def partial_channel_for(pool: Any) -> str:
    """The channel of partial llm replies (workflows/live/partial.py): not events, never stored."""
    return f"steadyflow:{int(pool.connection_kwargs.get('db') or 0)}:partial"


def encode(instance_id: int, first_seq: int, last_seq: int) -> bytes:
    return b"%d %d %d" % (instance_id, first_seq, last_seq)


def decode(data: bytes) -> tuple[int, int, int]:
    """(instance_id, first_seq, last_seq); ValueError for anything else."""
    instance_id, first_seq, last_seq = (int(part) for part in data.split())
    return instance_id, first_seq, last_seq


class _Publisher:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.pool = redis.ConnectionPool.from_url(settings.REDIS_URL, retry=None, socket_timeout=SOCKET_TIMEOUT_S,
                                                  socket_connect_timeout=SOCKET_TIMEOUT_S, client_name=CLIENT_NAME)
        self.channel = channel_for(self.pool)
        self.partial_channel = partial_channel_for(self.pool)
        self.conn: Any = None
        self.down_until = 0.0

    def send(self, payload: bytes, channel: str | None = None) -> None:
        with self.lock:
            if self.down_until:
                if time.monotonic() < self.down_until:
                    return
                self.down_until = 0.0
            try:
                if self.conn is None:
                    conn = self.pool.get_connection()  # connects (AUTH, SELECT) with replies on
                    conn.send_command("CLIENT", "REPLY", "OFF")  # answered by silence
                    self.conn = conn
                self.conn.send_command("PUBLISH", channel or self.channel, payload)
            except (redis.RedisError, OSError) as exc:
                if self.conn is not None:
                    self.conn.disconnect()
                    self.conn = None
                self.down_until = time.monotonic() + RETRY_AFTER_S
                log.debug("live publish failed (the relay's poll will deliver): %s", exc)


_publisher: _Publisher | None = None
_lock = threading.Lock()


def _get_publisher() -> _Publisher:
    global _publisher
    publisher = _publisher
    # A forked child must not write on its parent's socket.
    if publisher is None or publisher.pid != os.getpid():
        with _lock:
            publisher = _publisher
            if publisher is None or publisher.pid != os.getpid():
                publisher = _publisher = _Publisher()
    return publisher


def publish_commit(instance_id: int, first_seq: int, last_seq: int) -> None:
    """Say, after its commit, that `instance_id` committed the events `first_seq..last_seq`."""
    if settings.STEADYFLOW["PUBLISH_EVENTS"]:
        _get_publisher().send(encode(instance_id, first_seq, last_seq))


def publish(messages: list[dict[str, Any]]) -> None:
    """The same for one commit's `Event.as_message()` dicts (all of one instance, in seq order)."""
    if messages:
        publish_commit(messages[0]["instance"], messages[0]["seq"], messages[-1]["seq"])


def publish_partial(payload: bytes) -> None:
    """A partial llm reply (workflows/live/partial.py encodes it) for the relay to pass to the sockets
    watching its instance; as fire-and-forget as a commit notice, and nothing catches up on a lost one."""
    if settings.STEADYFLOW["PUBLISH_EVENTS"]:
        publisher = _get_publisher()
        publisher.send(payload, publisher.partial_channel)
