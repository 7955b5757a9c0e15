"""Issue 19, item 9: event streams (SSE) and long polls are capped per user and per process (429 with
Retry-After past the cap, the slot given back when the stream ends), and neither holds a database
connection while it waits."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connection
from django.test import AsyncClient, Client

from dashboard.api.v1 import following, stream_slots
from workflows.models import WorkflowInstance

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def caps(settings: Any, redis_conn: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "STREAMS_PER_USER": 2, "STREAMS_PER_PROCESS": 3}


def logged_in(name: str) -> Client:
    user = User.objects.create_superuser(name, password=None)
    client = Client()
    client.force_login(user)
    return client


def test_long_polls_past_the_per_user_cap_get_429_and_the_slot_comes_back(caps: None,
                                                                         instance: WorkflowInstance) -> None:
    client = logged_in("alice")
    url = f"/api/v1/instances/{instance.pk}/events?after={instance.event_seq}&wait=3"
    answers: list[int] = []
    waiting = [threading.Thread(target=lambda: answers.append(client.get(url).status_code)) for _ in range(2)]
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + 10
    while stream_slots.SLOTS.total < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    refused = client.get(url)
    assert refused.status_code == 429, refused.content
    assert refused["Retry-After"] == str(stream_slots.RETRY_AFTER_S)
    assert "STREAMS_PER_USER" in refused.json()["detail"]
    # Another user is not held back by alice's cap, only by the process's.
    other = logged_in("bob")
    assert other.get(f"/api/v1/instances/{instance.pk}/events?after={instance.event_seq}&wait=1").status_code == 200
    for thread in waiting:
        thread.join()
    assert answers == [200, 200]
    assert stream_slots.SLOTS.total == 0
    assert client.get(f"/api/v1/instances/{instance.pk}/events?after={instance.event_seq}&wait=1").status_code == 200


def test_sse_streams_are_capped_and_closing_one_frees_its_slot(caps: None, instance: WorkflowInstance) -> None:
    user = User.objects.create_superuser("carol", password=None)

    async def scenario() -> list[Any]:
        client = AsyncClient()
        await client.aforce_login(user)
        url = f"/api/v1/instances/{instance.pk}/events/stream"
        opened = [await client.get(url), await client.get(url)]
        third = await client.get(url)
        opened[0].close()
        fourth = await client.get(url)
        for response in (opened[1], fourth):
            response.close()
        return [*(r.status_code for r in opened), third, fourth.status_code]

    first, second, third, fourth = async_to_sync(scenario)()
    assert (first, second, fourth) == (200, 200, 200)
    assert third.status_code == 429 and "STREAMS_PER_USER" in third.json()["detail"]
    assert stream_slots.SLOTS.total == 0


def test_the_process_cap_holds_for_everyone(caps: None) -> None:
    for user_id in (1, 2, 3):
        stream_slots.SLOTS.take(user_id)
    try:
        with pytest.raises(stream_slots.Problem) as refused:
            stream_slots.SLOTS.take(4)
        assert refused.value.status == 429 and "3 at most (STREAMS_PER_PROCESS)" in refused.value.detail
    finally:
        for user_id in (1, 2, 3):
            stream_slots.SLOTS.give_back(user_id)


def test_a_long_poll_holds_no_database_connection_while_it_waits(instance: WorkflowInstance) -> None:
    held: list[bool] = []

    def sleep(seconds: float) -> None:
        held.append(connection.connection is not None)

    following.wait_for_events(instance.pk, instance.event_seq, 10, 0.5, sleep=sleep)
    assert held and not any(held)
