"""The WebSocket consumers through the real ASGI stack (dashboard/asgi.py: origin check, session auth,
URL routing) and the real relay on Redis (dashboard/live/relay.py): who may connect, what they
receive, and that the process subscribes to the workers' notices while sockets watch.
The relay's gap filling is in test_live_relay.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from dashboard.asgi import application
from dashboard.live import relay as live_relay
from dashboard.live.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from dashboard.live.relay import get_relay
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.live import notices as live
from workflows.models import WorkflowInstance

from .sockets import GRAPH, ORIGIN, receive_until, run, session_headers, subscribers

pytestmark = pytest.mark.django_db(transaction=True)

@pytest.fixture
def instance(viewer: Any) -> WorkflowInstance:
    version = save_version("consumer-test", GRAPH)
    return runtime.start_instance(version, {"n": 1})


async def refused_with(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """Connect, expect the consumer's refusal message, then the close with its code."""
    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await comm.connect()
    assert connected
    message = await comm.receive_json_from(timeout=5)
    closed = await comm.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": message["code"]}
    await comm.disconnect()
    return message


def test_a_foreign_origin_is_rejected_before_the_consumer(viewer: Any, instance: WorkflowInstance) -> None:
    headers = [h for h in session_headers(viewer) if h[0] != b"origin"] + [(b"origin", b"http://evil.example")]

    async def go() -> None:
        for h in (headers, [h for h in headers if h[0] != b"origin"]):
            comm = WebsocketCommunicator(application, f"/ws/instances/{instance.pk}/", headers=h)
            connected, _ = await comm.connect()
            assert not connected
            await comm.disconnect()

    run(go)


def test_anonymous_users_are_refused(instance: WorkflowInstance) -> None:
    async def go() -> None:
        for path in (f"/ws/instances/{instance.pk}/", "/ws/dashboard/"):
            message = await refused_with(path, [ORIGIN])
            assert message == {"type": "error", "code": CLOSE_UNAUTHENTICATED, "message": "log in to watch workflows"}

    run(go)


def test_users_without_the_view_permission_are_refused(django_user_model: Any, instance: WorkflowInstance) -> None:
    nobody = django_user_model.objects.create_user("nobody")
    headers = session_headers(nobody)

    async def go() -> None:
        for path in (f"/ws/instances/{instance.pk}/", "/ws/dashboard/"):
            message = await refused_with(path, headers)
            assert message["code"] == CLOSE_FORBIDDEN
            assert "workflows.view_workflowinstance" in message["message"]

    run(go)


def test_an_unknown_instance_is_refused(viewer: Any) -> None:
    headers = session_headers(viewer)

    async def go() -> None:
        message = await refused_with("/ws/instances/999999/", headers)
        assert message == {"type": "error", "code": CLOSE_NOT_FOUND, "message": "instance 999999 does not exist"}

    run(go)


def test_a_viewer_receives_the_committed_events_of_its_instance_only(
        viewer: Any, instance: WorkflowInstance, monkeypatch: Any) -> None:
    # No poll during the test: what arrives came through the workers' notices on Redis.
    monkeypatch.setattr(live_relay, "POLL_S", 3600.0)
    headers = session_headers(viewer)
    other = runtime.start_instance(instance.version, {"n": 2})
    instance.refresh_from_db()
    last_seq = instance.event_seq

    async def go() -> None:
        comm = WebsocketCommunicator(application, f"/ws/instances/{instance.pk}/", headers=headers)
        connected, _ = await comm.connect()
        assert connected
        hello = await comm.receive_json_from(timeout=5)
        assert hello == {"type": "hello", "instance": instance.pk, "last_seq": last_seq}
        await asyncio.wait_for(get_relay().subscribed.wait(), timeout=5)
        assert subscribers() == 1

        # Another instance's events do not reach this socket.
        await database_sync_to_async(runtime.cancel_instance)(other.pk, "stop")
        assert await comm.receive_nothing(timeout=0.3)

        # A real transition, committed by the runtime and announced after commit by workflows/live/notices.py.
        await database_sync_to_async(runtime.cancel_instance)(instance.pk, "stop")
        seen = await receive_until(comm, "instance_cancelled")
        assert [e["seq"] for e in seen] == list(range(last_seq + 1, last_seq + 1 + len(seen)))
        assert {e["instance"] for e in seen} == {instance.pk}
        assert seen[0]["type"] == "step_cancelled" and seen[0]["node"] == "work"
        assert await comm.receive_nothing(timeout=0.3)  # each event once

        await comm.send_json_to({"type": "ping"})
        assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
        await comm.disconnect()
        # The last socket gone, the process's relay unsubscribes.
        for _ in range(50):
            if subscribers() == 0:
                break
            await asyncio.sleep(0.05)
        assert subscribers() == 0

    run(go)


def test_the_dashboard_socket_coalesces_notices_into_change_notices(viewer: Any) -> None:
    headers = session_headers(viewer)

    async def go() -> None:
        comm = WebsocketCommunicator(application, "/ws/dashboard/", headers=headers)
        connected, _ = await comm.connect()
        assert connected
        assert await comm.receive_json_from(timeout=5) == {"type": "hello"}
        await asyncio.wait_for(get_relay().subscribed.wait(), timeout=5)
        # What workers publish after their commits: instance 7 committed 1..3, instance 8 1, then 7 4..5.
        for instance_id, first, last in ((7, 1, 3), (8, 1, 1), (7, 4, 5)):
            live.publish_commit(instance_id, first, last)
        notice = await comm.receive_json_from(timeout=5)
        assert notice == {"type": "changes", "events": 6, "instances": [7, 8]}
        assert await comm.receive_nothing(timeout=0.8)
        await comm.disconnect()

    run(go)
