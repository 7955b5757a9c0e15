"""Following an instance's events: the long poll (`GET …/events?wait=S`) and the server-sent events
stream (`GET …/events/stream`, dashboard/api/v1/stream.py) read the same way.

Both poll the database with a growing pause (POLL_DELAYS_S, then POLL_MOST_S) rather than subscribe to
the live channel: nothing can be missed between a subscription and a read, a restart of Redis changes
nothing, and each read is one autocommit query pair, so no transaction stays open while waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connection

from dashboard.api.shapes import events_after
from workflows.engine.statuses import INSTANCE_FINAL
from workflows.models import WorkflowInstance

WAIT_MOST_S = 30  # the longest a long poll waits
POLL_DELAYS_S = (0.1, 0.2, 0.4, 0.8)
POLL_MOST_S = 1.0


def poll_delays() -> Iterator[float]:
    yield from POLL_DELAYS_S
    while True:
        yield POLL_MOST_S


def read(instance_id: int, after: int, limit: int) -> tuple[dict[str, Any], bool]:
    """The events after `after` and whether the instance is final. The status is read first: an instance
    final by then has committed its last events with it, so a final answer is never missing any."""
    instance = WorkflowInstance.objects.only("pk", "status", "event_seq").get(pk=instance_id)
    final = instance.status in INSTANCE_FINAL
    return events_after(instance, after, limit), final


def release_connection() -> None:
    """Give this thread's database connection back while a follower waits: a hundred waiting followers
    must not hold a hundred of PostgreSQL's connections. The next read opens one again. (Not inside a
    transaction: a test's, or ATOMIC_REQUESTS; there the connection is not ours to close.)"""
    if not connection.in_atomic_block:
        connection.close()


def wait_for_events(instance_id: int, after: int, limit: int, wait_s: float, *,
                    clock: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Events after `after`, as soon as there are any, or none once `wait_s` has passed or the instance
    is final (no more will come)."""
    deadline = clock() + wait_s
    delays = poll_delays()
    while True:
        page, final = read(instance_id, after, limit)
        left = deadline - clock()
        if page["events"] or final or left <= 0:
            return page
        release_connection()
        sleep(min(next(delays), left))
