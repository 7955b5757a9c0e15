"""The live view's delivery guarantee, through the real ASGI stack, Redis and database: a socket gets
every committed event after its hello, in order and once, even when the workers' notices are lost
(workflows/live/notices.py publishes them; dashboard/live/relay.py fills the gaps from the event log)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection

from dashboard.asgi import application
from dashboard.live import events as live_events
from dashboard.live import relay as live_relay
from dashboard.live.relay import get_relay
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.live import notices as live
from workflows.models import WorkflowInstance

from .sockets import GRAPH, receive_until, run, session_headers, subscribers

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def instance(viewer: Any) -> WorkflowInstance:
    instance = runtime.start_instance(save_version("relay-test", GRAPH), {})
    instance.refresh_from_db()
    return instance


def claim_work(instance_id: int) -> Any:
    """Commit the `work` step's claim (one event: step_started)."""
    step = WorkflowInstance.objects.get(pk=instance_id).steps.get(node_id="work")
    claim = runtime.claim_step(step.pk, "test-worker")
    assert claim is not None
    return claim


def finish_work(claim: Any) -> None:
    """Commit the `work` step's outcome (step_succeeded … instance_completed)."""
    runtime.finish_step(claim, runtime.run_claimed(claim))


async def open_socket(instance: WorkflowInstance, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(application, f"/ws/instances/{instance.pk}/", headers=headers)
    connected, _ = await comm.connect()
    assert connected
    hello = await comm.receive_json_from(timeout=5)
    assert hello["type"] == "hello"
    await asyncio.wait_for(get_relay().subscribed.wait(), timeout=5)
    return comm


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def test_an_event_whose_notice_was_lost_arrives_with_the_next_notice(
        viewer: Any, instance: WorkflowInstance, monkeypatch: Any) -> None:
    monkeypatch.setattr(live_relay, "POLL_S", 3600.0)  # nothing from the poll: only notices wake the relay
    headers = session_headers(viewer)
    start = instance.event_seq

    async def go() -> None:
        comm = await open_socket(instance, headers)
        with monkeypatch.context() as lost:
            lost.setattr(live, "publish_commit", lambda *notice: None)  # this commit's notice never leaves
            claim = await database_sync_to_async(claim_work)(instance.pk)
        assert await comm.receive_nothing(timeout=0.3)
        await database_sync_to_async(finish_work)(claim)
        seen = await receive_until(comm, "instance_completed")
        assert seqs(seen) == list(range(start + 1, start + 1 + len(seen)))
        assert seen[0]["type"] == "step_started" and seen[0]["node"] == "work"  # the lost commit's event
        assert await comm.receive_nothing(timeout=0.3)
        await comm.disconnect()

    run(go)


def test_without_any_notice_the_poll_delivers_every_event(
        viewer: Any, instance: WorkflowInstance, monkeypatch: Any, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "PUBLISH_EVENTS": False}  # workers publish nothing
    monkeypatch.setattr(live_relay, "POLL_S", 0.2)
    headers = session_headers(viewer)
    start = instance.event_seq

    async def go() -> None:
        comm = await open_socket(instance, headers)
        claim = await database_sync_to_async(claim_work)(instance.pk)
        await database_sync_to_async(finish_work)(claim)
        seen = await receive_until(comm, "instance_completed")
        assert seqs(seen) == list(range(start + 1, start + 1 + len(seen)))
        await database_sync_to_async(instance.refresh_from_db)()
        assert seen[-1]["seq"] == instance.event_seq
        await comm.disconnect()

    run(go)


def test_events_committed_while_the_subscription_is_down_arrive_after_it_returns(
        viewer: Any, instance: WorkflowInstance, monkeypatch: Any, redis_conn: Any) -> None:
    monkeypatch.setattr(live_relay, "POLL_S", 3600.0)
    headers = session_headers(viewer)
    start = instance.event_seq
    db = redis_conn.connection_pool.connection_kwargs.get("db") or 0

    async def go() -> None:
        comm = await open_socket(instance, headers)
        relays = [c for c in redis_conn.client_list()
                  if c.get("name") == live_relay.CLIENT_NAME and int(c.get("db", 0)) == db]
        assert len(relays) == 1
        get_relay().subscribed.clear()
        redis_conn.client_kill_filter(_id=relays[0]["id"])
        claim = await database_sync_to_async(claim_work)(instance.pk)  # published to nobody, or lost
        await database_sync_to_async(finish_work)(claim)
        seen = await receive_until(comm, "instance_completed")
        assert seqs(seen) == list(range(start + 1, start + 1 + len(seen)))
        await asyncio.wait_for(get_relay().subscribed.wait(), timeout=5)
        assert subscribers() == 1
        await comm.disconnect()

    run(go)


def test_two_sockets_on_one_instance_each_get_every_event_after_their_hello_once(
        viewer: Any, instance: WorkflowInstance) -> None:
    headers = session_headers(viewer)
    start = instance.event_seq

    async def go() -> None:
        first = await open_socket(instance, headers)
        claim = await database_sync_to_async(claim_work)(instance.pk)
        assert seqs(await receive_until(first, "step_started")) == [start + 1]
        second = await open_socket(instance, headers)  # its hello says start + 1
        await database_sync_to_async(finish_work)(claim)
        one = await receive_until(first, "instance_completed")
        two = await receive_until(second, "instance_completed")
        assert one == two and seqs(one) == list(range(start + 2, start + 2 + len(one)))
        assert await first.receive_nothing(timeout=0.3) and await second.receive_nothing(timeout=0.1)
        await first.disconnect()
        await second.disconnect()

    run(go)


def test_the_relay_reads_events_exactly_as_the_event_log_gives_them(instance: WorkflowInstance) -> None:
    finish_work(claim_work(instance.pk))  # events with and without step, node and payload
    expected = live_events.read_events(instance.pk, 0, 500)
    assert len(expected) >= 6 and any(e["step"] is None for e in expected) and any(e["payload"] for e in expected)
    fast = {"sqlite": live_events.SqliteEventReader, "postgresql": live_events.PostgresEventReader}

    async def go() -> None:
        reader = live_events.make_reader()
        assert type(reader) is fast[connection.vendor]
        try:
            assert await reader.read(instance.pk, 0, 500) == expected
            assert await reader.read(instance.pk, 2, 3) == expected[2:5]
            assert await reader.read(instance.pk, expected[-1]["seq"], 500) == []
        finally:
            await reader.close()

    run(go)


def test_a_commit_publishes_one_compact_notice(redis_conn: Any) -> None:
    pubsub = listen_to_notices(redis_conn)
    try:
        live.publish([{"instance": 42, "seq": 7, "type": "step_succeeded"},
                      {"instance": 42, "seq": 8, "type": "edges_taken"},
                      {"instance": 42, "seq": 9, "type": "step_queued"}])
        live.publish_commit(43, 1, 1)
        live.publish([])  # nothing committed, nothing said
        received = [next_notice(pubsub, 5), next_notice(pubsub, 5)]
        assert received == [b"42 7 9", b"43 1 1"]
        assert live.decode(received[0]) == (42, 7, 9)
        assert next_notice(pubsub, 0.3) is None
    finally:
        pubsub.close()


def listen_to_notices(redis_conn: Any) -> Any:
    """A subscription to the workers' notices, confirmed by Redis before it is returned."""
    pubsub = redis_conn.pubsub()
    pubsub.subscribe(live.channel_for(redis_conn.connection_pool))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message is not None and message["type"] == "subscribe":
            return pubsub
    raise AssertionError("Redis did not confirm the subscription")


def next_notice(pubsub: Any, timeout: float) -> bytes | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.05)
        if message is not None and message["type"] == "message":
            return bytes(message["data"])
    return None


def test_a_publisher_whose_connection_dropped_reconnects(redis_conn: Any) -> None:
    db = redis_conn.connection_pool.connection_kwargs.get("db") or 0
    pubsub = listen_to_notices(redis_conn)
    try:
        live.publish_commit(50, 1, 1)
        assert next_notice(pubsub, 5) == b"50 1 1"
        publishers = [c for c in redis_conn.client_list()
                      if c.get("name") == live.CLIENT_NAME and int(c.get("db", 0)) == db]
        assert publishers
        for client in publishers:
            redis_conn.client_kill_filter(_id=client["id"])
        # A notice or two may vanish into the dead connection; then the publisher connects again.
        heard = None
        for seq in range(2, 100):
            live.publish_commit(50, seq, seq)
            heard = next_notice(pubsub, 0.1)
            if heard is not None:
                break
        assert heard is not None and heard.startswith(b"50 ")
    finally:
        pubsub.close()


def test_a_worker_that_cannot_reach_redis_carries_on() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = closed.getsockname()[1]
        code = ("import django; django.setup()\n"
                "from workflows.live import notices as live\n"
                "for seq in range(1, 101): live.publish_commit(1, seq, seq)\n"
                "print('carried on')\n")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings",
               "REDIS_URL": f"redis://127.0.0.1:{port}/0", "DATABASE_URL": "sqlite:///:memory:"}
        result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "carried on"
