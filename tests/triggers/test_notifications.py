"""Notifications: a review halt, a human task and a failure each notify the subscribed channels after
COMMIT; webhook deliveries are signed, go through the guarded outbound client to a receiver on
loopback, are retried with backoff after a 500 and logged per attempt; email carries the review link."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

import tests.workflows.functions  # noqa: F401 - registers tests.fail_times
from tests.conftest import chain
from tests.workflows.support import py
from workflows import runtime
from workflows.models import ReviewItem
from workflows.scheduler import inprocess
from workflows.triggers import notifications, signing
from workflows.triggers import tick as triggers
from workflows.triggers.models import DeliveryAttempt, NotificationChannel, NotificationDelivery

HUMAN = chain({"id": "ask", "type": "human", "config": {"prompt": "Ship it?"}})
NAP = {**chain({"id": "nap", "type": "wait", "config": {"seconds": 60}}), "settings": {"ttl_s": 60}}


class Receiver:
    """A webhook receiver on loopback: answers the statuses queued in `replies` (then 200) and keeps
    what it was sent."""

    def __init__(self) -> None:
        self.replies: list[int] = []
        self.seen: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.replies.pop(0) if receiver.replies else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/steadyflow"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "HTTP_ALLOWLIST": ["127.0.0.1/32"], "NOTIFY_BACKOFF_S": 30.0,
                           "NOTIFY_MAX_ATTEMPTS": 3, "BASE_URL": "https://flow.example.com/"}
    server = Receiver()
    yield server
    server.stop()


def verified(secret: str, headers: dict[str, str], body: bytes) -> bool:
    try:
        signing.verify(headers.get("steadyflow-signature"), body, [secret], now=time.time(), window_s=300,
                       delivery_id=headers.get("steadyflow-delivery", ""))
    except signing.SignatureRejected:
        return False
    return True


def test_a_human_task_notifies_a_signed_webhook_retried_after_a_500(
        receiver: Receiver, make_version: Any, django_capture_on_commit_callbacks: Any, redis_conn: Any) -> None:
    channel = NotificationChannel.objects.create(name="pager", kind="webhook", target=receiver.url,
                                                 events=["human_task"])
    NotificationChannel.objects.create(name="off", kind="webhook", target=receiver.url, enabled=False)
    NotificationChannel.objects.create(name="failures only", kind="webhook", target=receiver.url,
                                       events=["failed"])
    version = make_version(HUMAN, slug="ship")
    with django_capture_on_commit_callbacks(execute=True):
        instance = runtime.start_instance(version, {})
    item = ReviewItem.objects.get(instance=instance, status="open")
    (delivery,) = NotificationDelivery.objects.all()
    assert (delivery.channel_id, delivery.event, delivery.review_id) == (channel.pk, "human_task", item.pk)
    assert redis_conn.llen("rq:queue:default") == 1  # the job that sends it, enqueued after COMMIT

    receiver.replies = [500]
    now = timezone.now()
    assert notifications.deliver_pending(now) == 0
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("pending", 1, now + timedelta(seconds=30))
    assert notifications.retry_due(now + timedelta(seconds=29)) == 0  # backing off
    assert len(receiver.seen) == 1
    # The scheduler loop enqueues the sending job once the retry is due, not before.
    redis_conn.delete("rq:queue:default")
    notifications.KICKED_AT[0] = 0.0
    assert triggers.tick(now + timedelta(seconds=29)) == {}
    with django_capture_on_commit_callbacks(execute=True):  # django-rq enqueues on commit
        assert triggers.tick(now + timedelta(seconds=30)) == {"notifications_kicked": 1}
    assert redis_conn.llen("rq:queue:default") == 1
    assert notifications.retry_due(now + timedelta(seconds=30)) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("delivered", 2, None)
    log = [(a.number, a.status_code, a.ok, a.error, a.next_attempt_at)
           for a in DeliveryAttempt.objects.order_by("number")]
    assert log == [(1, 500, False, "HTTP 500", now + timedelta(seconds=30)), (2, 200, True, "", None)]

    assert len(receiver.seen) == 2
    for headers, body in receiver.seen:
        assert verified(channel.secret, headers, body)
        assert not verified("whsec_other", headers, body)
        assert headers["steadyflow-event"] == "human_task"
        assert headers["steadyflow-delivery"] == f"notification-{delivery.pk}"
    payload = json.loads(receiver.seen[-1][1])
    assert payload["url"] == f"https://flow.example.com/review/{item.pk}/"
    assert (payload["event"], payload["instance"], payload["workflow"]) == ("human_task", instance.pk, "ship")


def test_a_delivery_gives_up_after_its_attempts(receiver: Receiver, make_version: Any,
                                                django_capture_on_commit_callbacks: Any, redis_conn: Any) -> None:
    NotificationChannel.objects.create(name="pager", kind="webhook", target=receiver.url, events=["human_task"])
    with django_capture_on_commit_callbacks(execute=True):
        runtime.start_instance(make_version(HUMAN), {})
    receiver.replies = [503, 503, 503]
    now = timezone.now()
    for minutes in (0, 1, 2):
        notifications.retry_due(now + timedelta(minutes=minutes))
    delivery = NotificationDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("gave_up", 3)
    assert [a.next_attempt_at is None for a in DeliveryAttempt.objects.order_by("number")] == [False, False, True]
    assert notifications.retry_due(now + timedelta(hours=2)) == 0
    assert len(receiver.seen) == 3


def test_a_refused_target_is_an_attempt_with_the_reason(settings: Any, make_version: Any,
                                                       django_capture_on_commit_callbacks: Any,
                                                       redis_conn: Any) -> None:
    """Without the allow-list, loopback is refused by the guarded client: logged, retried, never sent."""
    settings.STEADYFLOW = {**settings.STEADYFLOW, "HTTP_ALLOWLIST": []}
    NotificationChannel.objects.create(name="pager", kind="webhook", target="http://127.0.0.1:9/x",
                                       events=["human_task"])
    with django_capture_on_commit_callbacks(execute=True):
        runtime.start_instance(make_version(HUMAN), {})
    assert notifications.retry_due(timezone.now()) == 0
    (attempt,) = DeliveryAttempt.objects.all()
    assert attempt.status_code is None and "OutboundBlocked" in attempt.error


def test_a_review_halt_emails_the_link(settings: Any, make_version: Any, django_capture_on_commit_callbacks: Any,
                                       redis_conn: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "BASE_URL": "https://flow.example.com"}
    NotificationChannel.objects.create(name="ops mail", kind="email", target="ops@example.com, lead@example.com",
                                       events=["review"])
    NotificationChannel.objects.create(name="tasks mail", kind="email", target="tasks@example.com",
                                       events=["human_task"])
    instance = runtime.start_instance(make_version(NAP, slug="napper"), {})
    with django_capture_on_commit_callbacks(execute=True):
        assert runtime.expire_instance(instance.pk, timezone.now() + timedelta(hours=1))
    item = ReviewItem.objects.get(instance=instance, status="open")
    assert notifications.deliver_pending() == 1
    (message,) = mail.outbox
    assert message.to == ["ops@example.com", "lead@example.com"]
    assert message.subject == f"[Steadyflow] napper instance {instance.pk} halted into review"
    assert f"https://flow.example.com/review/{item.pk}/" in message.body
    assert "ttl_expired" in message.body
    assert NotificationDelivery.objects.get().status == "delivered"


def test_nothing_is_recorded_without_channels(make_version: Any, django_capture_on_commit_callbacks: Any,
                                              redis_conn: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        runtime.start_instance(make_version(HUMAN), {})
    assert not NotificationDelivery.objects.exists()
    assert redis_conn.llen("rq:queue:default") == 0


@pytest.mark.django_db(transaction=True)
def test_a_failure_is_notified_end_to_end_through_the_queue(receiver: Receiver, redis_conn: Any) -> None:
    """A real job path: the step fails in an RQ worker, the commit records the notice and enqueues
    the sending job, the same burst worker sends it to the receiver."""
    from workflows.authoring.definitions import save_version

    channel = NotificationChannel.objects.create(name="pager", kind="webhook", target=receiver.url,
                                                 events=["failed"])
    version = save_version("doomed", chain(py("pay", "tests.fail_times", args={"failures": 5, "permanent": True})))
    instance = runtime.start_instance(version, {})
    inprocess.drain()
    instance.refresh_from_db()
    assert instance.status == "failed"
    delivery = NotificationDelivery.objects.get()
    assert (delivery.event, delivery.status, delivery.attempts) == ("failed", "delivered", 1)
    headers, body = receiver.seen[0]
    assert verified(channel.secret, headers, body)
    payload = json.loads(body)
    assert payload["url"] == f"https://flow.example.com/instances/{instance.pk}/"
    assert payload["status"] == "failed"
