"""Publishing committed events to the Channels groups `instance.<id>` and `dashboard`.

Called after commit with the events of one commit (one instance), sent as one group message
{"type": "workflow.events", "events": [...]} to each group. Sending happens on one background
thread with its own event loop, so a worker's hot path never waits on Redis for the live view, and
events leave in commit order.
A lost live message is harmless: pages catch up from the event log by sequence number.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import queue
import threading
from typing import Any

from django.conf import settings

log = logging.getLogger("steadyflow.live")

_STOP = object()


class _Publisher:
    def __init__(self) -> None:
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=100_000)
        self.thread = threading.Thread(target=self._run, daemon=True, name="steadyflow-live")
        self.thread.start()
        atexit.register(self.close)

    def _run(self) -> None:
        from channels.layers import get_channel_layer

        # One private event loop for this thread: channels-redis pools connections per loop.
        loop = asyncio.new_event_loop()
        layer = get_channel_layer()
        try:
            while True:
                item = self.queue.get()
                if item is _STOP:
                    return
                if layer is not None:
                    loop.run_until_complete(self._send(layer, item))
        finally:
            loop.close()

    @staticmethod
    async def _send(layer: Any, messages: list[dict[str, Any]]) -> None:
        # One group message per commit, not per event: publishing per event cost 30-40% of a
        # worker's CPU (docs/BENCHMARKS.md). A commit's events all belong to one instance.
        try:
            payload = {"type": "workflow.events", "events": messages}
            await layer.group_send(f"instance.{messages[0]['instance']}", payload)
            await layer.group_send("dashboard", payload)
        except Exception as exc:  # noqa: BLE001 - the live view is best effort
            log.debug("live publish failed: %s", exc)

    def put(self, messages: list[dict[str, Any]]) -> None:
        try:
            self.queue.put_nowait(messages)
        except queue.Full:
            log.warning("live publish queue full: dropping %d event(s)", len(messages))

    def close(self) -> None:
        self.queue.put(_STOP)
        self.thread.join(timeout=2)


_publisher: _Publisher | None = None
_lock = threading.Lock()


def publish(messages: list[dict[str, Any]]) -> None:
    global _publisher
    if not settings.STEADYFLOW["PUBLISH_EVENTS"] or not messages:
        return
    if _publisher is None:
        with _lock:
            if _publisher is None:
                _publisher = _Publisher()
    _publisher.put(messages)
