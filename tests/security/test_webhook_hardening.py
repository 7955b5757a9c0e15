"""Issue 19, item 11: webhook signatures cover the delivery id (a captured request replayed inside the
window under a new id starts nothing), a malformed timestamp is a 401 naming it (never a 500), and a
flood of unsigned requests at a hook does not lock out its valid sender."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

import pytest
from django.test import Client

from tests.triggers.test_webhooks import GRAPH, ORDER
from workflows.models import WorkflowInstance
from workflows.triggers import signing
from workflows.triggers.models import Webhook

SENDER, FLOODERS = "198.51.100.20", [f"203.0.113.{n}" for n in range(1, 12)]


@pytest.fixture
def hook(make_version: Any, redis_conn: Any) -> Webhook:
    version = make_version(GRAPH, slug="orders")
    webhook: Webhook = Webhook.objects.create(definition=version.definition, input_mapping={"order": "/data/id"})
    return webhook


def send(hook: Webhook, body: bytes, header: str, delivery: str, address: str = SENDER) -> Any:
    return Client(REMOTE_ADDR=address).post(
        f"/hooks/{hook.definition.slug}/{hook.hook_id}", body, content_type="application/json",
        HTTP_STEADYFLOW_SIGNATURE=header, HTTP_STEADYFLOW_DELIVERY=delivery)


def test_a_captured_request_replayed_with_a_new_delivery_id_starts_nothing(hook: Webhook) -> None:
    body = json.dumps(ORDER).encode()
    header = signing.header_value([hook.secret], int(time.time()), body, "d-1")
    assert send(hook, body, header, "d-1").status_code == 202
    replayed = send(hook, body, header, "d-2-forged", address="203.0.113.99")
    assert replayed.status_code == 401, replayed.content
    assert WorkflowInstance.objects.count() == 1


def test_a_signature_over_the_body_alone_is_refused_naming_the_scheme(hook: Webhook) -> None:
    body = json.dumps(ORDER).encode()
    t = int(time.time())
    old = hmac.new(hook.secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    refused = send(hook, body, f"t={t},v1={old}", "d-1")
    assert refused.status_code == 401 and "delivery id" in refused.json()["message"]
    assert not WorkflowInstance.objects.exists()


@pytest.mark.parametrize("stamp", ["²", "١٢٣", "1²", "", "-5", "1e9", "9" * 13])
def test_a_malformed_timestamp_is_a_401_naming_it(hook: Webhook, stamp: str) -> None:
    response = send(hook, b"{}", f"t={stamp},v2=00", "d-1")
    assert response.status_code == 401, response.content
    assert "t=" in response.json()["message"]


def test_a_flood_of_unsigned_requests_does_not_lock_out_the_valid_sender(hook: Webhook, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "WEBHOOK_REJECT_LIMIT": 3, "WEBHOOK_HOOK_REJECT_LIMIT": 5,
                           "WEBHOOK_REJECT_WINDOW_S": 60}
    body = json.dumps(ORDER).encode()
    first = send(hook, body, signing.header_value([hook.secret], int(time.time()), body, "ok-1"), "ok-1")
    assert first.status_code == 202, first.content
    for address in FLOODERS:
        send(hook, body, "t=1,v2=bad", "x", address=address)
    # The hook is over its limit for strangers...
    assert send(hook, body, "t=1,v2=bad", "x", address="192.0.2.200").status_code == 429
    # ...but its sender, who delivered validly before, is still heard.
    later = send(hook, body, signing.header_value([hook.secret], int(time.time()), body, "ok-2"), "ok-2")
    assert later.status_code == 202, later.content
    assert WorkflowInstance.objects.count() == 2
