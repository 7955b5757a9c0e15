"""Following an instance: the long poll (`…/events?wait=S`) and the server-sent events stream
(`…/events/stream`). Events land from another thread (a real cancel, committed on its own connection)
once the follower has read and found nothing, so the waiting path is the one tested."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from dashboard.api.v1 import following
from tests.api.conftest import SIMPLE, Api, assert_problem
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import WorkflowInstance
from workflows.operators import operations


@pytest.fixture
def waiting(db: None) -> WorkflowInstance:
    """An instance waiting on a 60 s timer: no event comes by itself."""
    return runtime.start_instance(save_version("napping", SIMPLE), {})


def cancel_after_first_empty_read(monkeypatch: pytest.MonkeyPatch, instance: WorkflowInstance,
                                  user: Any) -> threading.Thread:
    """Cancel the instance from another thread as soon as the follower has read once and found nothing."""
    looked = threading.Event()
    real_read: Callable[..., Any] = following.read

    def read(*args: Any) -> Any:
        page, final = real_read(*args)
        if not page["events"]:
            looked.set()
        return page, final

    monkeypatch.setattr(following, "read", read)

    def cancel() -> None:
        try:
            assert looked.wait(60)
            operations.cancel(instance.pk, user, note="from the test")
        finally:
            connection.close()

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


def parse_frames(response: Any) -> list[dict[str, str]]:
    """The whole stream's frames. The sync test client gathers an async stream whole (it ends: the
    instance is final) and warns that it does."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "StreamingHttpResponse must consume")
        raw = b"".join(response)
    frames = []
    for block in raw.decode().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(": ")
            if name:
                fields[name] = value
        if fields:
            frames.append(fields)
    return frames


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_answers_when_an_event_lands(as_role, people, waiting, monkeypatch):
    last = waiting.event_seq
    thread = cancel_after_first_empty_read(monkeypatch, waiting, people["superuser"])
    response = as_role("viewer", "read").get(f"instances/{waiting.pk}/events?after={last}&wait=30")
    thread.join()
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["events"] and all(e["seq"] > last for e in answer["events"])
    assert "instance_cancelled" in {e["type"] for e in answer["events"]}
    assert answer["last_seq"] == answer["events"][-1]["seq"]


@pytest.mark.django_db(transaction=True)
def test_a_long_poll_ends_empty_when_nothing_comes(as_role, waiting):
    response = as_role("viewer", "read").get(f"instances/{waiting.pk}/events?after={waiting.event_seq}&wait=1")
    assert response.status_code == 200
    assert response.json() == {"events": [], "last_seq": waiting.event_seq}


def test_a_long_poll_on_a_final_instance_does_not_wait(as_role, people, waiting, monkeypatch):
    operations.cancel(waiting.pk, people["superuser"])
    waiting.refresh_from_db()

    def no_pause() -> Iterator[float]:
        raise AssertionError("waited for an instance that is final")
        yield 0.0

    monkeypatch.setattr(following, "poll_delays", no_pause)
    answer = as_role("viewer").get(f"instances/{waiting.pk}/events?after={waiting.event_seq}&wait=30").json()
    assert answer == {"events": [], "last_seq": waiting.event_seq}


def test_the_wait_is_bounded(as_role, waiting):
    body = assert_problem(as_role("viewer").get(f"instances/{waiting.pk}/events?wait=31"), 422)
    assert body["errors"][0]["field"] == "query.wait"


def test_the_stream_sends_every_event_then_ends_and_resumes_from_last_event_id(as_role, people, waiting):
    operations.cancel(waiting.pk, people["superuser"])
    waiting.refresh_from_db()
    viewer = as_role("viewer", "read")
    response = viewer.get(f"instances/{waiting.pk}/events/stream")
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    frames = parse_frames(response)
    assert frames[0] == {"retry": "2000"}
    events = [f for f in frames if "id" in f]
    assert [int(f["id"]) for f in events] == list(range(1, waiting.event_seq + 1))
    assert all(f["event"] for f in events)
    assert frames[-1]["event"] == "end" and '"status": "cancelled"' in frames[-1]["data"]

    resumed = parse_frames(viewer.get(f"instances/{waiting.pk}/events/stream", **{"Last-Event-ID": "2"}))
    assert [int(f["id"]) for f in resumed if "id" in f] == list(range(3, waiting.event_seq + 1))
    after = parse_frames(viewer.get(f"instances/{waiting.pk}/events/stream?after=3"))
    assert [int(f["id"]) for f in after if "id" in f] == list(range(4, waiting.event_seq + 1))


@pytest.mark.django_db(transaction=True)
def test_the_stream_follows_a_live_instance_until_it_is_final(as_role, people, waiting, monkeypatch):
    thread = cancel_after_first_empty_read(monkeypatch, waiting, people["superuser"])
    response = as_role("viewer", "read").get(f"instances/{waiting.pk}/events/stream",
                                             **{"Last-Event-ID": str(waiting.event_seq)})
    frames = parse_frames(response)
    thread.join()
    sent = [f for f in frames if "id" in f]
    assert sent and "instance_cancelled" in {f["event"] for f in sent}
    assert all(int(f["id"]) > waiting.event_seq for f in sent)
    assert frames[-1]["event"] == "end"


def test_the_stream_refuses_as_the_api_does(as_role, people, waiting, client):
    path = f"instances/{waiting.pk}/events/stream"
    assert_problem(Api(client).get(path), 401, "authentication required")
    assert_problem(Api(client, "sf_not-a-token").get(path), 401, "authentication failed")
    assert_problem(as_role("designer", "design").get(path), 403, "read")
    assert_problem(as_role("viewer").get("instances/999999/events/stream"), 404, "does not exist")
    assert_problem(as_role("viewer").get(path, **{"Last-Event-ID": "x1"}), 422, "sequence number")
    assert_problem(as_role("viewer").post(path), 405, "use GET")
