"""The web process's side of the live view: hear which instances committed, send their events.

Workers publish one compact notice per commit on Redis (workflows/live/notices.py: instance id, first and
last sequence number). One `Relay` per web process (per event loop), started by the first WebSocket
that watches something and stopped when the last one leaves, subscribes to those notices and:

- for an instance that sockets of this process watch, reads the events after the last one each socket
  was sent from the event log (one query per instance, shared by its sockets, made on the event loop
  itself: dashboard/live/events.py) and sends them in sequence order, each exactly once per socket;
- for the dashboard sockets, coalesces the notices into at most one `changes` message per
  DASHBOARD_FLUSH_S (the page then refreshes its figures).

No committed event stays missing: every POLL_S, and right after (re)subscribing, the relay also reads
the `event_seq` of every watched instance from the database and sends whatever a socket lacks. A lost
or late notice (a worker that could not reach Redis, a relay reconnecting) costs at most POLL_S of
delay, never an event; the event log is the source, Redis only a wake-up.

Events go straight to this process's sockets rather than through a Channels group: every web process
runs its own relay and hears every notice, so a group send would deliver each event once per process.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, Protocol

import redis.asyncio as aioredis
from channels.db import database_sync_to_async
from django.conf import settings

from dashboard.live.events import EventReader, make_reader
from workflows.live import notices as live
from workflows.live import partial as live_partial
from workflows.models import WorkflowInstance

log = logging.getLogger("steadyflow.live")

POLL_S = 1.0
DASHBOARD_FLUSH_S = 0.5
READ_LIMIT = 500  # events per query when a socket is far behind
RECONNECT_MAX_S = 5.0
CLIENT_NAME = "steadyflow-live-relay"  # as CLIENT LIST shows it


class InstanceWatcher(Protocol):
    # The last seq this socket was sent (or told of in its hello); None until its hello is out.
    sent_seq: int | None

    async def send_events(self, events: list[dict[str, Any]]) -> None: ...

    async def send_partial(self, message: dict[str, Any]) -> None: ...


class DashboardWatcher(Protocol):
    async def send_changes(self, events: int, instances: list[int]) -> None: ...


def read_last_seqs(instance_ids: list[int]) -> dict[int, int]:
    return dict(WorkflowInstance.objects.filter(pk__in=instance_ids).values_list("pk", "event_seq"))


class Relay:
    def __init__(self) -> None:
        self.watchers: dict[int, set[InstanceWatcher]] = {}
        self.dashboards: set[DashboardWatcher] = set()
        self.known: dict[int, int] = {}  # per watched instance: the highest seq known committed
        self.pumps: dict[int, asyncio.Task[None]] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.flush: asyncio.Task[None] | None = None
        self.pending_events = 0
        self.pending_instances: set[int] = set()
        self.subscribed = asyncio.Event()  # tests wait for it before publishing
        self.reader: EventReader | None = None

    # --- sockets come and go ----------------------------------------------------------------------

    def watch(self, instance_id: int, watcher: InstanceWatcher) -> None:
        self.watchers.setdefault(instance_id, set()).add(watcher)
        self._start()

    def ready(self, instance_id: int, watcher: InstanceWatcher, last_seq: int) -> None:
        """The socket's hello said `last_seq`: from now on it is sent every later event."""
        watcher.sent_seq = last_seq
        self._advance(instance_id, last_seq)
        self._pump(instance_id)  # a notice heard before the hello went out is not lost

    async def unwatch(self, instance_id: int, watcher: InstanceWatcher) -> None:
        group = self.watchers.get(instance_id)
        if group is not None:
            group.discard(watcher)
            if not group:
                del self.watchers[instance_id]
                self.known.pop(instance_id, None)
        await self._stop_if_idle()

    def watch_dashboard(self, watcher: DashboardWatcher) -> None:
        self.dashboards.add(watcher)
        self._start()

    async def unwatch_dashboard(self, watcher: DashboardWatcher) -> None:
        self.dashboards.discard(watcher)
        await self._stop_if_idle()

    def _start(self) -> None:
        if not self.tasks:
            self.reader = make_reader()
            self.tasks = [asyncio.ensure_future(self._listen()), asyncio.ensure_future(self._poll_forever())]

    async def _stop_if_idle(self) -> None:
        if self.watchers or self.dashboards:
            return
        tasks = [*self.tasks, *self.pumps.values(), *([self.flush] if self.flush else [])]
        reader = self.reader
        self.tasks, self.pumps, self.flush, self.reader = [], {}, None, None
        self.known.clear()
        self.subscribed.clear()
        for task in tasks:
            task.cancel()
        # Wait for them (a read in flight finishes first), then close their reader: a socket that
        # connects meanwhile has started a fresh relay with a reader of its own.
        await asyncio.gather(*tasks, return_exceptions=True)
        if reader is not None:
            await reader.close()

    # --- what committed ---------------------------------------------------------------------------

    def note(self, instance_id: int, first_seq: int, last_seq: int) -> None:
        """A worker's notice: `instance_id` committed `first_seq..last_seq`."""
        if self.dashboards:
            self.pending_events += max(last_seq - first_seq + 1, 1)
            if len(self.pending_instances) < 100:
                self.pending_instances.add(instance_id)
            if self.flush is None:
                self.flush = asyncio.ensure_future(self._flush_dashboards())
        if instance_id in self.watchers:
            self._advance(instance_id, last_seq)
            self._pump(instance_id)

    async def partial(self, data: bytes) -> None:
        """A streaming llm step's reply so far (workflows/live/partial.py): to the sockets watching its
        instance, as a `partial` message. Not an event: no seq, nothing stored, nothing caught up."""
        try:
            message = live_partial.decode(data)
        except ValueError:
            log.warning("live relay: ignoring a malformed partial reply")
            return
        for watcher in list(self.watchers.get(message["instance"], ())):
            if watcher.sent_seq is not None:  # after its hello, like events
                await _send_partial_quietly(watcher, message)

    def _advance(self, instance_id: int, seq: int) -> None:
        if instance_id in self.watchers and seq > self.known.get(instance_id, 0):
            self.known[instance_id] = seq

    def _pump(self, instance_id: int) -> None:
        # One pump per instance, so its events leave in order; it loops while anyone lags behind.
        task = self.pumps.get(instance_id)
        if task is None or task.done():
            self.pumps[instance_id] = asyncio.ensure_future(self._send_missing(instance_id))

    async def _send_missing(self, instance_id: int) -> None:
        try:
            while True:
                watchers = self.watchers.get(instance_id, set())
                known = self.known.get(instance_id, 0)
                behind = [w for w in watchers if w.sent_seq is not None and w.sent_seq < known]
                if not behind:
                    return
                after = min(w.sent_seq for w in behind if w.sent_seq is not None)
                if self.reader is None:
                    return
                events = await self.reader.read(instance_id, after, READ_LIMIT)
                if not events:
                    return  # a notice ahead of the log (another database's?): the poll corrects `known`
                self._advance(instance_id, events[-1]["seq"])
                progressed = False
                for watcher in behind:
                    sent = watcher.sent_seq
                    mine = [e for e in events if sent is not None and e["seq"] > sent]
                    # The log has no holes (seqs are assigned under the instance's row lock and
                    # commit in order), so `mine` starts right after what the socket has.
                    if mine and mine[0]["seq"] == (sent or 0) + 1:
                        watcher.sent_seq = mine[-1]["seq"]
                        progressed = True
                        await _send_quietly(watcher, mine)
                if not progressed:
                    return  # never spin on the database; the next notice or poll tries again
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed read is retried by the next notice or poll
            log.warning("live relay: reading the events of instance %s failed: %s", instance_id, exc)
        finally:
            if self.pumps.get(instance_id) is asyncio.current_task():
                del self.pumps[instance_id]

    async def _flush_dashboards(self) -> None:
        try:
            await asyncio.sleep(DASHBOARD_FLUSH_S)
            events, instances = self.pending_events, sorted(self.pending_instances)
            self.pending_events, self.pending_instances = 0, set()
            self.flush = None
            for watcher in list(self.dashboards):
                await watcher.send_changes(events, instances)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the page refreshes on its own timer too
            log.exception("live relay: dashboard notice failed")

    async def poll(self) -> None:
        """Compare every watched instance with the database and send what any socket lacks."""
        ids = list(self.watchers)
        if not ids:
            return
        for instance_id, seq in (await database_sync_to_async(read_last_seqs)(ids)).items():
            self._advance(instance_id, seq)
            self._pump(instance_id)

    # --- the two loops ----------------------------------------------------------------------------

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            await self._poll_once()

    async def _poll_once(self) -> None:
        try:
            await self.poll()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the database may be restarting; try again
            log.warning("live relay: poll failed: %s", exc)

    async def _listen(self) -> None:
        delay = 0.1
        while True:
            # No socket timeout: a quiet channel is normal (a silently dead one costs only the poll's delay).
            client = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=None, client_name=CLIENT_NAME)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                notices = live.channel_for(client.connection_pool).encode()
                await pubsub.subscribe(notices.decode(), live.partial_channel_for(client.connection_pool))
                self.subscribed.set()
                delay = 0.1
                await self._poll_once()  # whatever committed while we were not subscribed
                async for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    if message.get("channel") != notices:
                        await self.partial(message["data"])
                        continue
                    try:
                        self.note(*live.decode(message["data"]))
                    except ValueError:
                        log.warning("live relay: ignoring a malformed notice %r", message["data"][:100])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - Redis restarts; the poll covers the gap
                self.subscribed.clear()
                log.warning("live relay: subscription lost (%s); again in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_S)
            finally:
                await _close_quietly(pubsub, client)


async def _send_quietly(watcher: InstanceWatcher, events: list[dict[str, Any]]) -> None:
    try:
        await watcher.send_events(events)
    except Exception as exc:  # noqa: BLE001 - a socket closing meanwhile must not stop the others
        log.debug("live relay: a socket refused events: %s", exc)


async def _send_partial_quietly(watcher: InstanceWatcher, message: dict[str, Any]) -> None:
    try:
        await watcher.send_partial(message)
    except Exception as exc:  # noqa: BLE001 - a socket closing meanwhile
        log.debug("live relay: a socket refused a partial reply: %s", exc)


async def _close_quietly(pubsub: Any, client: aioredis.Redis) -> None:
    try:
        await pubsub.aclose()
        await client.aclose()
    except Exception:  # noqa: BLE001, S110 - closing a broken connection may fail too
        pass


_relays: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Relay] = weakref.WeakKeyDictionary()


def get_relay() -> Relay:
    """This event loop's relay (daphne runs one loop per process; tests may run several in turn)."""
    loop = asyncio.get_running_loop()
    relay = _relays.get(loop)
    if relay is None:
        relay = _relays[loop] = Relay()
    return relay
