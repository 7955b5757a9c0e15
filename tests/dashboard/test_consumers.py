"""The WebSocket consumers through the real ASGI stack (dashboard/asgi.py: origin check, session auth,
URL routing) and the real channel layer on Redis: who may connect, what they receive, and that the
socket joins and leaves its group."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission
from django.test import Client

from dashboard.asgi import application
from dashboard.consumers import CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from workflows import runtime
from workflows.definitions import save_version
from workflows.models import WorkflowInstance

pytestmark = pytest.mark.django_db(transaction=True)

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


@pytest.fixture
def viewer(django_user_model: Any, redis_conn: Any) -> Any:
    user = django_user_model.objects.create_user("viewer")
    # The permission itself: transactional tests flush the groups the data migration made.
    user.user_permissions.add(Permission.objects.get(codename="view_workflowinstance"))
    return user


@pytest.fixture
def instance(viewer: Any) -> WorkflowInstance:
    version = save_version("consumer-test", GRAPH)
    return runtime.start_instance(version, {"n": 1})


def run(coro: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(coro)()


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


def test_a_viewer_joins_the_instance_group_and_receives_its_committed_events(
        viewer: Any, instance: WorkflowInstance) -> None:
    headers = session_headers(viewer)
    layer = get_channel_layer()
    group = f"instance.{instance.pk}"
    instance.refresh_from_db()
    last_seq = instance.event_seq

    async def members() -> int:
        # channels-redis keeps a group as a sorted set of channel names.
        return int(await layer.connection(layer.consistent_hash(group)).zcard(layer._group_key(group)))

    async def go() -> None:
        comm = WebsocketCommunicator(application, f"/ws/instances/{instance.pk}/", headers=headers)
        connected, _ = await comm.connect()
        assert connected
        hello = await comm.receive_json_from(timeout=5)
        assert hello == {"type": "hello", "instance": instance.pk, "last_seq": last_seq}
        assert await members() == 1

        # Another instance's events do not reach this socket.
        await layer.group_send(f"instance.{instance.pk + 1000}", {"type": "workflow.event", "event": {"seq": 1}})
        assert await comm.receive_nothing(timeout=0.3)

        # A real transition, committed by the runtime and published after commit by workflows/live.py.
        from channels.db import database_sync_to_async

        await database_sync_to_async(runtime.cancel_instance)(instance.pk, "stop")
        seen = []
        while not seen or seen[-1]["type"] != "instance_cancelled":
            message = await comm.receive_json_from(timeout=5)
            assert message["type"] == "event"
            seen.append(message["event"])
        assert [e["seq"] for e in seen] == list(range(last_seq + 1, last_seq + 1 + len(seen)))
        assert {e["instance"] for e in seen} == {instance.pk}
        assert seen[0]["type"] == "step_cancelled" and seen[0]["node"] == "work"

        await comm.send_json_to({"type": "ping"})
        assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
        await comm.disconnect()
        assert await members() == 0

    run(go)


def test_the_dashboard_socket_coalesces_events_into_change_notices(viewer: Any) -> None:
    headers = session_headers(viewer)
    layer = get_channel_layer()

    async def go() -> None:
        comm = WebsocketCommunicator(application, "/ws/dashboard/", headers=headers)
        connected, _ = await comm.connect()
        assert connected
        assert await comm.receive_json_from(timeout=5) == {"type": "hello"}
        for seq in range(1, 6):
            kind = "instance_started" if seq == 1 else "step_succeeded"
            await layer.group_send("dashboard", {"type": "workflow.event",
                                                 "event": {"instance": 7 + seq % 2, "seq": seq, "type": kind}})
        notice = await comm.receive_json_from(timeout=5)
        assert notice == {"type": "changes", "events": {"instance_started": 1, "step_succeeded": 4},
                          "instances": [7, 8]}
        assert await comm.receive_nothing(timeout=0.8)
        await comm.disconnect()

    run(go)
