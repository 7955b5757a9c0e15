"""WebSocket consumers for the live views.

`InstanceConsumer` forwards the committed events of one instance (group `instance.<id>`, published by
workflows/live.py after commit). It joins the group *before* reading the instance's last sequence
number and sends that number first, so a page knows at once which events it must fetch from the
event log: nothing committed between the page's load and the socket's opening is missed.

`DashboardConsumer` listens to the `dashboard` group, which carries every event of every instance.
It does not forward them one by one: it coalesces them into at most one `changes` message per
DASHBOARD_FLUSH_S, which tells the page to refresh its figures.

Refusals are sent as a message with a `message`, then the socket closes with a 44xx code (after
accepting, so the browser sees the code and the page can say why instead of retrying forever).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from workflows.engine import strict_json
from workflows.models import WorkflowInstance

log = logging.getLogger("steadyflow.dashboard")

VIEW_PERMISSION = "workflows.view_workflowinstance"
DASHBOARD_GROUP = "dashboard"
DASHBOARD_FLUSH_S = 0.5

# What a frame from a page may be: anything else is dropped unread.
MAX_FRAME_CHARS = 4096
MAX_FRAME_DEPTH = 8

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


def instance_group(instance_id: int) -> str:
    return f"instance.{instance_id}"


class _Refusing(AsyncJsonWebsocketConsumer):
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

    async def check_user(self) -> Any:
        """The user when they may view instances; otherwise refuse and return None."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED, "log in to watch workflows")
            return None
        if not await database_sync_to_async(user.has_perm)(VIEW_PERMISSION):
            await self.refuse(CLOSE_FORBIDDEN, f"permission denied: you need {VIEW_PERMISSION}")
            return None
        return user


class InstanceConsumer(_Refusing):
    instance_id: int
    group: str | None = None

    async def connect(self) -> None:
        self.instance_id = int(self.scope["url_route"]["kwargs"]["instance_id"])
        if await self.check_user() is None:
            return
        if not await database_sync_to_async(WorkflowInstance.objects.filter(pk=self.instance_id).exists)():
            await self.refuse(CLOSE_NOT_FOUND, f"instance {self.instance_id} does not exist")
            return
        self.group = instance_group(self.instance_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # Read after joining: every event past this number reaches the socket through the group.
        last_seq = await database_sync_to_async(self._last_seq)()
        await self.accept()
        await self.send_json({"type": "hello", "instance": self.instance_id, "last_seq": last_seq})

    def _last_seq(self) -> int:
        return WorkflowInstance.objects.filter(pk=self.instance_id).values_list("event_seq", flat=True).first() or 0

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            self.group = None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The page only listens; a ping keeps intermediaries from closing an idle socket.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def workflow_event(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "event", "event": message["event"]})

    async def workflow_events(self, message: dict[str, Any]) -> None:
        # One group message per commit (workflows/live.py); the page still gets one frame per event.
        for event in message["events"]:
            await self.send_json({"type": "event", "event": event})


class DashboardConsumer(_Refusing):
    joined = False
    _flush: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        if await self.check_user() is None:
            return
        self.pending: Counter[str] = Counter()
        self.instances: set[Any] = set()  # instance ids as the events carry them
        await self.channel_layer.group_add(DASHBOARD_GROUP, self.channel_name)
        self.joined = True
        await self.accept()
        await self.send_json({"type": "hello"})

    async def disconnect(self, code: int) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        if self.joined:
            await self.channel_layer.group_discard(DASHBOARD_GROUP, self.channel_name)
            self.joined = False

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def workflow_event(self, message: dict[str, Any]) -> None:
        self._count(message["event"])

    async def workflow_events(self, message: dict[str, Any]) -> None:
        for event in message["events"]:
            self._count(event)

    def _count(self, event: dict[str, Any]) -> None:
        self.pending[event.get("type", "?")] += 1
        instance = event.get("instance")
        if instance is not None and len(self.instances) < 100:
            self.instances.add(instance)
        if self._flush is None:
            self._flush = asyncio.ensure_future(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(DASHBOARD_FLUSH_S)
        counts, instances = dict(self.pending), sorted(self.instances)
        self.pending.clear()
        self.instances.clear()
        self._flush = None
        await self.send_json({"type": "changes", "events": counts, "instances": instances})
