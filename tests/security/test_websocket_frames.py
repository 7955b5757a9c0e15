"""The WebSocket consumers ignore frames they cannot use (not JSON, binary, oversize, over-deep,
non-finite): the socket stays open, nothing is logged at ERROR, and a ping still gets its pong."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission
from django.test import Client

from dashboard.asgi import application
from dashboard.live.consumers import MAX_FRAME_CHARS
from tests.security.conftest import GRAPH
from workflows import runtime
from workflows.authoring.definitions import save_version

pytestmark = pytest.mark.django_db(transaction=True)

BAD_TEXT = ["not json", "{", "[" * 10_000, '{"type": NaN}', '{"type": "ping", "x": 1e400}', '"\\ud800"',
            "x" * (MAX_FRAME_CHARS + 1), "null", "[]", '{"type": ["ping"]}', '{"type": "unknown"}', " "]


@pytest.fixture
def headers(django_user_model: Any, redis_conn: Any) -> list[tuple[bytes, bytes]]:
    user = django_user_model.objects.create_user("viewer")
    user.user_permissions.add(Permission.objects.get(codename="view_workflowinstance"))
    client = Client()
    client.force_login(user)
    return [(b"origin", b"http://localhost"), (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


@pytest.mark.parametrize("which", ["instance", "dashboard"])
def test_bad_frames_are_ignored_and_the_socket_keeps_working(headers: list[tuple[bytes, bytes]], which: str,
                                                             caplog: Any) -> None:
    path = "/ws/dashboard/"
    if which == "instance":
        path = f"/ws/instances/{runtime.start_instance(save_version('frames', GRAPH), {}).pk}/"

    async def go() -> None:
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, _ = await comm.connect()
        assert connected
        assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
        for frame in BAD_TEXT:
            await comm.send_to(text_data=frame)
        await comm.send_to(bytes_data=b"\x00\xff binary")
        assert await comm.receive_nothing(timeout=0.3)
        await comm.send_json_to({"type": "ping"})
        assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
        await comm.disconnect()

    with caplog.at_level(logging.DEBUG):
        async_to_sync(go)()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert any("ignored a frame" in r.getMessage() for r in caplog.records)
