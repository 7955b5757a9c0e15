"""Who may open which WebSocket: the socket row of the permission matrix (tests/security/test_permissions.py,
which lists the routes in SOCKETS and checks every route has a row). A module of its own because the test is
transactional (the ASGI application reads the session and the user from its own thread and connection),
while test_permissions.py's tests share rows built once in a transaction left open for the module."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from dashboard.live.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from tests.dashboard.sockets import ORIGIN, run, session_headers
from tests.security.test_permissions import GRAPH, ROLES, SOCKETS, users
from workflows import runtime
from workflows.authoring.definitions import save_version

SOCKET_ROLES = {"anonymous": CLOSE_UNAUTHENTICATED, "nobody": CLOSE_FORBIDDEN, "viewer": None, "designer": None,
                "operator": None, "outsider": None, "superuser": None}  # None: allowed (a hello)


@pytest.mark.django_db(transaction=True)
def test_socket_matrix(redis_conn: Any) -> None:
    from dashboard.asgi import application

    people = users(None)
    instance = runtime.start_instance(save_version("sockets", GRAPH), {})
    assert set(SOCKET_ROLES) == set(ROLES)

    headers = {role: session_headers(user) if user is not None else [ORIGIN] for role, user in people.items()}

    async def go() -> None:
        for route, path in SOCKETS.items():
            for role, refused in SOCKET_ROLES.items():
                comm = WebsocketCommunicator(application, path(instance), headers=headers[role])
                connected, _ = await comm.connect()
                assert connected
                message = await comm.receive_json_from(timeout=5)
                if refused is None:
                    assert message["type"] == "hello", (route, role, message)
                else:
                    assert message["code"] == refused, (route, role, message)
                await comm.disconnect()

    run(go)
