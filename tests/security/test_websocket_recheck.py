"""Issue 19, item 14: a live-view WebSocket re-checks its user while it is open: after the user logs
out, is deactivated, or loses the permission to view instances, the socket is told why and closed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Permission, User
from django.test import Client

from dashboard.asgi import application
from dashboard.live import consumers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quick_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumers, "RECHECK_S", 0.1)


def viewer(name: str) -> tuple[User, Client, list[tuple[bytes, bytes]]]:
    user = User.objects.create_user(name, password="correct horse battery staple")
    user.user_permissions.add(Permission.objects.get(codename="view_workflowinstance"))
    client = Client()
    client.force_login(user)
    headers = [(b"origin", b"http://localhost"), (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]
    return user, client, headers


def log_out(user: User, client: Client) -> None:
    client.logout()


def deactivate(user: User, client: Client) -> None:
    User.objects.filter(pk=user.pk).update(is_active=False)


def lose_permission(user: User, client: Client) -> None:
    user.user_permissions.clear()


def change_password(user: User, client: Client) -> None:
    fresh = User.objects.get(pk=user.pk)
    fresh.set_password("another horse battery staple")
    fresh.save()


@pytest.mark.parametrize(("change", "code"), [(log_out, consumers.CLOSE_UNAUTHENTICATED),
                                              (deactivate, consumers.CLOSE_UNAUTHENTICATED),
                                              (change_password, consumers.CLOSE_UNAUTHENTICATED),
                                              (lose_permission, consumers.CLOSE_FORBIDDEN)])
def test_the_socket_closes_when_its_user_may_no_longer_watch(redis_conn: Any, change: Callable[..., None],
                                                             code: int) -> None:
    user, client, headers = viewer(f"v-{change.__name__}")

    async def go() -> list[Any]:
        comm = WebsocketCommunicator(application, "/ws/dashboard/", headers=headers)
        connected, _ = await comm.connect()
        assert connected
        assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
        # Still allowed: the re-checks say nothing.
        assert await comm.receive_nothing(timeout=0.4)
        await database_sync_to_async(change)(user, client)
        told = await comm.receive_json_from(timeout=5)
        closed = await comm.receive_output(timeout=5)
        await comm.disconnect()
        return [told, closed]

    told, closed = async_to_sync(go)()
    assert told["type"] == "error" and told["code"] == code
    assert closed == {"type": "websocket.close", "code": code}
