"""The webhook endpoint's limit on rejected requests: per client address and per hook, counted in Redis,
answered 429 with Retry-After before any lookup or HMAC; accepted deliveries count nothing."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.test import Client
from django.utils import timezone

from tests.triggers.test_webhooks import GRAPH, ORDER, post
from workflows.models import WorkflowInstance
from workflows.triggers import signing, webhooks
from workflows.triggers.models import Webhook, WebhookRejection

ATTACKER, SENDER = "203.0.113.7", "198.51.100.20"


@pytest.fixture
def hook(make_version: Any) -> Webhook:
    version = make_version(GRAPH, slug="orders")
    webhook: Webhook = Webhook.objects.create(definition=version.definition, input_mapping={"order": "/data/id"})
    return webhook


@pytest.fixture
def limits(settings: Any) -> dict[str, Any]:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "WEBHOOK_REJECT_LIMIT": 3, "WEBHOOK_HOOK_REJECT_LIMIT": 5,
                           "WEBHOOK_REJECT_WINDOW_S": 60}
    return dict(settings.STEADYFLOW)


def bad(hook: Webhook, address: str = ATTACKER, **kwargs: Any) -> Any:
    return post(hook, ORDER, secrets=["whsec_wrong"], client=Client(REMOTE_ADDR=address), **kwargs)


def test_an_address_over_the_limit_gets_429_without_any_hmac_work(hook: Webhook, limits: Any) -> None:
    assert [bad(hook).status_code for _ in range(3)] == [401, 401, 401]
    with mock.patch.object(signing, "verify", side_effect=AssertionError("HMAC checked")) as verify, \
            mock.patch.object(webhooks, "receive", side_effect=AssertionError("hook looked up")) as receive:
        refused = bad(hook)
        # A correctly signed delivery from the same address waits too: the address is what is limited.
        signed = post(hook, ORDER, delivery="from-attacker", client=Client(REMOTE_ADDR=ATTACKER))
        unknown = post(Webhook(definition=hook.definition, hook_id="nope", secret="x"), ORDER,
                       client=Client(REMOTE_ADDR=ATTACKER))
    assert verify.call_count == 0 and receive.call_count == 0
    for response in (refused, signed, unknown):
        assert response.status_code == 429, response.content
        assert 1 <= int(response["Retry-After"]) <= 60
        assert response.json()["message"].startswith("too many rejected webhook requests from your address")
    # The 429s wrote nothing: only the three counted rejections are in the hook's log.
    assert WebhookRejection.objects.filter(webhook=hook).count() == 3
    assert not WorkflowInstance.objects.exists()


def test_valid_deliveries_from_another_address_are_unaffected(hook: Webhook, limits: Any) -> None:
    for _ in range(3):
        bad(hook)
    assert bad(hook).status_code == 429
    accepted = post(hook, ORDER, delivery="real", client=Client(REMOTE_ADDR=SENDER))
    assert accepted.status_code == 202, accepted.content
    # Accepted deliveries count nothing: the sender keeps going past the limit.
    for n in range(5):
        assert post(hook, ORDER, delivery=f"real-{n}", client=Client(REMOTE_ADDR=SENDER)).status_code == 202
    # X-Forwarded-For is not trusted: claiming another address does not escape the limit.
    spoofed = Client(REMOTE_ADDR=ATTACKER).post(f"/hooks/orders/{hook.hook_id}", b"{}",
                                                content_type="application/json", HTTP_X_FORWARDED_FOR=SENDER)
    assert spoofed.status_code == 429


def test_the_hook_limit_bounds_many_addresses_together(hook: Webhook, limits: Any) -> None:
    for n in range(5):
        assert bad(hook, address=f"192.0.2.{n}").status_code == 401
    refused = bad(hook, address="192.0.2.99")
    assert refused.status_code == 429
    assert refused.json()["message"].startswith("too many rejected requests for this webhook")
    # Unknown hooks (404) count for the address only: guessing cannot lock a real hook.
    other = Webhook.objects.create(definition=hook.definition)
    for n in range(6):
        assert post(Webhook(definition=hook.definition, hook_id=other.hook_id + "x", secret="x"), ORDER,
                    client=Client(REMOTE_ADDR=f"192.0.2.{100 + n}")).status_code == 404
    assert post(other, ORDER, delivery="ok", client=Client(REMOTE_ADDR=SENDER)).status_code == 202


def test_oversized_bodies_and_wrong_methods_count(hook: Webhook, limits: Any, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "WEBHOOK_MAX_BODY_BYTES": 1024}
    client = Client(REMOTE_ADDR=ATTACKER)
    assert client.get(f"/hooks/orders/{hook.hook_id}").status_code == 405
    big = {"data": {"id": 1, "pad": "x" * 2000}}
    assert post(hook, big, client=client).status_code == 413
    assert post(hook, big, client=client).status_code == 413
    assert client.get(f"/hooks/orders/{hook.hook_id}").status_code == 429


def test_signed_mistakes_do_not_count(hook: Webhook, limits: Any) -> None:
    """After a valid signature the sender is who it says: its bad payloads are logged, not limited."""
    for n in range(5):
        assert post(hook, {"other": 1}, delivery=f"d-{n}", client=Client(REMOTE_ADDR=SENDER)).status_code == 400
    assert post(hook, ORDER, delivery="fixed", client=Client(REMOTE_ADDR=SENDER)).status_code == 202


def test_the_window_resets(hook: Webhook, limits: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for _ in range(3):
        bad(hook)
    assert bad(hook).status_code == 429
    later = timezone.now() + timedelta(seconds=61)
    from dashboard.pages import trigger_views

    monkeypatch.setattr(trigger_views.timezone, "now", lambda: later)
    assert bad(hook, at=later.timestamp()).status_code == 401  # a new window: looked at again
    assert post(hook, ORDER, delivery="after", at=later.timestamp(),
                client=Client(REMOTE_ADDR=ATTACKER)).status_code == 202


def test_the_limit_reached_is_logged_once_without_secrets(hook: Webhook, limits: Any,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="steadyflow.triggers"):
        for _ in range(5):
            bad(hook)
    reached = [r for r in caplog.records if "limit reached" in r.getMessage()]
    assert len(reached) == 1 and ATTACKER in reached[0].getMessage()
    assert not any(hook.secret in r.getMessage() or "v2=" in r.getMessage() for r in caplog.records)


def test_no_limit_when_zero_and_open_when_redis_is_down(hook: Webhook, limits: Any, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "WEBHOOK_REJECT_LIMIT": 0, "WEBHOOK_HOOK_REJECT_LIMIT": 0}
    assert [bad(hook).status_code for _ in range(6)] == [401] * 6
    settings.STEADYFLOW = {**settings.STEADYFLOW, "WEBHOOK_REJECT_LIMIT": 1, "WEBHOOK_HOOK_REJECT_LIMIT": 1}
    from workflows.adapters import ratelimit

    with mock.patch.object(ratelimit, "connection", side_effect=ConnectionError("down")):
        assert [bad(hook).status_code for _ in range(3)] == [401] * 3
        assert post(hook, ORDER, delivery="still", client=Client(REMOTE_ADDR=SENDER)).status_code == 202
