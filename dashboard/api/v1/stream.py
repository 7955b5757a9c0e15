"""`GET /api/v1/instances/{id}/events/stream`: an instance's events as server-sent events.

Each event is `id: <seq>`, `event: <type>`, `data: <the event as JSON>` (the shape of `…/events`). A
client resumes after a disconnect with `Last-Event-ID` (browsers' EventSource send it by themselves)
or `?after=N`. The stream ends with `event: end` (data: the instance's final status) once the instance
is final and every event was sent; it also ends after STREAM_MOST_S, to be reopened from the last id.

An async view (the web server is ASGI, daphne): a waiting stream holds no thread. Each read runs in a
thread (sync_to_async) as one autocommit query pair; between reads it sleeps with a growing pause
(dashboard/api/v1/following.py), and sends a comment line every HEARTBEAT_S to keep proxies from closing it.
Authentication and permissions are the API's: a token with the `read` scope or the session. Open
streams are capped per user and per process (dashboard/api/v1/stream_slots.py), and no stream holds a
database connection between its reads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from dashboard.api.v1 import following, problems, stream_slots
from dashboard.api.v1.auth import authenticate_token
from dashboard.api.v1.problems import Problem
from dashboard.security import permissions, tokens
from workflows.models import WorkflowInstance

CONTENT_TYPE = "text/event-stream"
PAGE = 500
HEARTBEAT_S = 15.0
STREAM_MOST_S = 300.0
RETRY_MS = 2000  # what EventSource waits before reconnecting


def _start_at(request: HttpRequest) -> int:
    """Where to resume: Last-Event-ID (a reconnect) wins over ?after=; 0 from the start."""
    for raw in (request.headers.get("Last-Event-ID"), request.GET.get("after")):
        if raw is None or raw.strip() == "":
            continue
        text = raw.strip()
        if not text.isascii() or not text.isdecimal() or len(text) > 18:
            raise Problem(422, "Last-Event-ID and 'after' are an event sequence number (0 or more)",
                          [{"field": "query.after", "message": "not a sequence number"}])
        return int(text)
    return 0


def _authorize(request: HttpRequest, instance_id: int) -> int:
    """Who is asking, and may they read this instance's events? Returns where to start; raises Problem."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    token = None
    if scheme.lower() == "bearer":
        authenticate_token(request, presented.strip())
        token = request.api_token
    elif not request.user.is_authenticated:
        raise Problem(401, "authentication required: send 'Authorization: Bearer sf_…' or log in")
    refused = tokens.scope_refusal(token, request.user, "read", permissions.VIEW_INSTANCES)
    if refused is not None:
        raise Problem(403, refused)
    if not WorkflowInstance.objects.filter(pk=instance_id).exists():
        raise Problem(404, f"instance {instance_id} does not exist")
    return _start_at(request)


def frame(event: dict[str, Any]) -> str:
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"


def _read(instance_id: int, after: int) -> tuple[dict[str, Any], bool]:
    try:
        return following.read(instance_id, after, PAGE)
    finally:
        following.release_connection()  # not held while the stream waits


async def _frames(instance_id: int, after: int, release: stream_slots.Release) -> AsyncIterator[str]:
    try:
        async for part in _follow(instance_id, after):
            yield part
    finally:
        release()


async def _follow(instance_id: int, after: int) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    started = last_sent = loop.time()
    delays = following.poll_delays()
    yield f"retry: {RETRY_MS}\n\n"
    while True:
        page, final = await sync_to_async(_read)(instance_id, after)
        for event in page["events"]:
            yield frame(event)
            after = event["seq"]
        if page["events"]:
            last_sent, delays = loop.time(), following.poll_delays()
            if len(page["events"]) == PAGE:
                continue  # more are waiting: no pause
        if final:
            status = await sync_to_async(_status)(instance_id)
            yield f"event: end\ndata: {json.dumps({'status': status, 'last_seq': after})}\n\n"
            return
        if loop.time() - started >= STREAM_MOST_S:
            return  # the client reconnects with Last-Event-ID
        if loop.time() - last_sent >= HEARTBEAT_S:
            yield ": keep-alive\n\n"
            last_sent = loop.time()
        await asyncio.sleep(next(delays))


def _status(instance_id: int) -> str:
    try:
        return str(WorkflowInstance.objects.values_list("status", flat=True).get(pk=instance_id))
    finally:
        following.release_connection()


class _Stream(StreamingHttpResponse):
    """Gives its slot back when closed (the server closes a response however it ends), even if its
    body was never started (a client gone at once)."""

    release: stream_slots.Release | None = None

    def close(self) -> None:
        super().close()
        if self.release is not None:
            self.release()


async def event_stream(request: HttpRequest, instance_id: int) -> HttpResponse:
    if request.method != "GET":
        refused = problems.response(request, 405, f"method {request.method} not allowed here (use GET)")
        refused["Allow"] = "GET"
        return refused
    try:
        after = await sync_to_async(_authorize)(request, instance_id)
        # Each open stream is capped per user and per process (429 past it): dashboard/api/v1/stream_slots.py.
        stream_slots.SLOTS.take(request.user.pk)
    except Problem as exc:
        return problems.response(request, exc.status, exc.detail, exc.errors, exc.headers)
    release = stream_slots.Release(request.user.pk)
    response = _Stream(_frames(instance_id, after, release), content_type=CONTENT_TYPE)
    response.release = release
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on as it comes
    return response
