"""WebSocket consumers for the live views, fed by this process's relay (dashboard/live/relay.py).

`InstanceConsumer` sends the committed events of one instance, one `{"type": "event", "event": …}`
frame each, in sequence order. It registers with the relay *before* reading the instance's last
sequence number and sends that number first (`hello`), so a page knows at once which events it must
fetch from the event log; the relay then sends every event after it, exactly once, reading them from
the event log itself (so an event whose worker's notice was lost still arrives).

`DashboardConsumer` does not forward events one by one: the relay coalesces them into at most one
`{"type": "changes", "events": <count>, "instances": [...]}` message per half second, which
tells the page to refresh its figures.

Refusals are sent as a message with a `message`, then the socket closes with a 44xx code (after
accepting, so the browser sees the code and the page can say why instead of retrying forever).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from dashboard.live.relay import get_relay
from dashboard.security import permissions
from workflows.engine import strict_json
from workflows.models import WorkflowInstance

log = logging.getLogger("steadyflow.dashboard")

VIEW_PERMISSIONS = (permissions.VIEW_INSTANCES,)
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404

# What a frame from a page may be: anything else is dropped unread.
MAX_FRAME_CHARS = 4096
MAX_FRAME_DEPTH = 8


# How often an open socket re-checks its user: logged out (the session gone or moved to someone
# else), deactivated, password changed, or no longer allowed to view instances -> told why and closed.
RECHECK_S = 5.0


def still_refused(user_id: int, session_key: str | None, auth_hash: str | None) -> tuple[int, str] | None:
    """Why this socket's user may no longer watch, as (close code, message); None while they may."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.utils.crypto import constant_time_compare

    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None or not user.is_active:
        return CLOSE_UNAUTHENTICATED, "your account is no longer active"
    if session_key is not None:
        session = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
        if str(session.get(SESSION_KEY)) != str(user_id):
            return CLOSE_UNAUTHENTICATED, "you were logged out: log in again to watch workflows"
        stored = session.get(HASH_SESSION_KEY) or auth_hash
        if stored is None or not constant_time_compare(stored, user.get_session_auth_hash()):
            return CLOSE_UNAUTHENTICATED, "your password changed: log in again to watch workflows"
    message = permissions.refusal(user, *VIEW_PERMISSIONS)
    if message is not None:
        return CLOSE_FORBIDDEN, message
    return None


class _Refusing(AsyncJsonWebsocketConsumer):
    _recheck: asyncio.Task[None] | None = None
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """Pages send only small JSON pings: a binary, oversize or non-JSON frame is dropped (and logged
        at debug), never an error that closes the socket with a traceback in the log."""
        if text_data is None or len(text_data) > MAX_FRAME_CHARS:
            log.debug("websocket: ignored a %s frame", "binary" if text_data is None else "too large")
            return
        try:
            content = strict_json.loads(text_data, what="the frame", max_depth=MAX_FRAME_DEPTH)
        except strict_json.JSONRejected as exc:
            log.debug("websocket: ignored a frame: %s", exc)
            return
        await self.receive_json(content, **kwargs)

    async def refuse(self, code: int, message: str) -> None:
        await self.accept()
        await self.send_json({"type": "error", "code": code, "message": message})
        await self.close(code=code)

    def start_rechecks(self, user: Any) -> None:
        """Re-check the user every RECHECK_S while the socket is open (stopped on disconnect)."""
        session = self.scope.get("session")
        key = getattr(session, "session_key", None)
        self._recheck = asyncio.ensure_future(self._rechecks(user.pk, key, user.get_session_auth_hash()))

    async def _rechecks(self, user_id: int, session_key: str | None, auth_hash: str) -> None:
        while True:
            await asyncio.sleep(RECHECK_S)
            try:
                refused = await database_sync_to_async(still_refused)(user_id, session_key, auth_hash)
            except Exception as exc:  # noqa: BLE001 - a database hiccup: try again next time
                log.warning("websocket: could not re-check its user: %s", type(exc).__name__)
                continue
            if refused is not None:
                code, message = refused
                await self.send_json({"type": "error", "code": code, "message": message})
                await self.close(code=code)
                return

    def stop_rechecks(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None

    async def check_user(self) -> Any:
        """The user when they may view instances, as the instance API asks (dashboard/security/permissions.py);
        otherwise refuse and return None."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED, "log in to watch workflows")
            return None
        message = await database_sync_to_async(permissions.refusal)(user, *VIEW_PERMISSIONS)
        if message is not None:
            await self.refuse(CLOSE_FORBIDDEN, message)
            return None
        return user


class InstanceConsumer(_Refusing):
    instance_id: int
    watching = False
    sent_seq: int | None = None  # read and written by the relay

    async def connect(self) -> None:
        self.instance_id = int(self.scope["url_route"]["kwargs"]["instance_id"])
        if await self.check_user() is None:
            return
        if not await database_sync_to_async(WorkflowInstance.objects.filter(pk=self.instance_id).exists)():
            await self.refuse(CLOSE_NOT_FOUND, f"instance {self.instance_id} does not exist")
            return
        relay = get_relay()
        relay.watch(self.instance_id, self)
        self.watching = True
        # Read after registering: a notice for anything past this number reaches the relay meanwhile.
        last_seq = await database_sync_to_async(self._last_seq)()
        await self.accept()
        await self.send_json({"type": "hello", "instance": self.instance_id, "last_seq": last_seq})
        relay.ready(self.instance_id, self, last_seq)
        self.start_rechecks(self.scope["user"])

    def _last_seq(self) -> int:
        return WorkflowInstance.objects.filter(pk=self.instance_id).values_list("event_seq", flat=True).first() or 0

    async def disconnect(self, code: int) -> None:
        self.stop_rechecks()
        if self.watching:
            await get_relay().unwatch(self.instance_id, self)
            self.watching = False

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The page only listens; a ping keeps intermediaries from closing an idle socket.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def send_events(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            await self.send_json({"type": "event", "event": event})

    async def send_partial(self, message: dict[str, Any]) -> None:
        """A streaming llm step's reply so far (not an event: no seq; the step's commit replaces it)."""
        await self.send_json({"type": "partial", **message})


class DashboardConsumer(_Refusing):
    watching = False

    async def connect(self) -> None:
        if await self.check_user() is None:
            return
        get_relay().watch_dashboard(self)
        self.watching = True
        await self.accept()
        await self.send_json({"type": "hello"})
        self.start_rechecks(self.scope["user"])

    async def disconnect(self, code: int) -> None:
        self.stop_rechecks()
        if self.watching:
            await get_relay().unwatch_dashboard(self)
            self.watching = False

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def send_changes(self, events: int, instances: list[int]) -> None:
        await self.send_json({"type": "changes", "events": events, "instances": instances})
