"""Incoming webhooks: signatures (good, bad, expired, replayed, rotated), the delivery id as the
idempotency key, the input mapping, the body cap, CSRF exemption, and every rejection logged."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.conftest import chain
from workflows.models import WorkflowInstance
from workflows.triggers import signing
from workflows.triggers.models import Webhook, WebhookRejection

GRAPH = chain({"id": "nap", "type": "wait", "config": {"seconds": 3600}})


@pytest.fixture
def hook(make_version: Any) -> Webhook:
    version = make_version(GRAPH, slug="orders")
    webhook: Webhook = Webhook.objects.create(definition=version.definition,
                                              input_mapping={"order": "/data/id", "sku": "data.items.0.sku"})
    return webhook


def post(hook: Webhook, payload: Any, *, secrets: list[str] | None = None, at: float | None = None,
         delivery: str | None = "d-1", header: str | None = None, raw: bytes | None = None,
         client: Client | None = None) -> Any:
    body = raw if raw is not None else json.dumps(payload).encode()
    timestamp = int(at if at is not None else time.time())
    headers = {}
    if header is not None:
        headers["HTTP_STEADYFLOW_SIGNATURE"] = header
    else:
        headers["HTTP_STEADYFLOW_SIGNATURE"] = signing.header_value(secrets or [hook.secret], timestamp, body,
                                                                        delivery or "")
    if delivery is not None:
        headers["HTTP_STEADYFLOW_DELIVERY"] = delivery
    return (client or Client()).post(f"/hooks/{hook.definition.slug}/{hook.hook_id}", body,
                                     content_type="application/json", **headers)


ORDER = {"data": {"id": 42, "items": [{"sku": "A-1"}]}}


def rejections(hook: Webhook) -> list[tuple[int, str]]:
    return [(r.status, r.reason) for r in WebhookRejection.objects.filter(webhook=hook).order_by("pk")]


def test_a_signed_delivery_starts_an_instance_with_the_mapped_input(hook: Webhook) -> None:
    # CSRF checks on: the endpoint is exempt (no cookie, the signature authenticates).
    response = post(hook, ORDER, client=Client(enforce_csrf_checks=True))
    assert response.status_code == 202, response.content
    instance = WorkflowInstance.objects.get(pk=response.json()["instance"])
    assert instance.input == {"order": 42, "sku": "A-1"}
    assert instance.idempotency_key == f"webhook:{hook.hook_id}:d-1"
    assert response.json()["duplicate"] is False
    assert rejections(hook) == []


def test_the_same_delivery_id_twice_starts_one_instance(hook: Webhook) -> None:
    first = post(hook, ORDER, delivery="same")
    second = post(hook, ORDER, delivery="same")
    assert first.status_code == second.status_code == 202
    assert first.json()["instance"] == second.json()["instance"]
    assert second.json()["duplicate"] is True
    assert WorkflowInstance.objects.filter(definition_id=hook.definition_id).count() == 1
    assert post(hook, ORDER, delivery="other").json()["instance"] != first.json()["instance"]


def test_a_bad_signature_is_refused_and_logged(hook: Webhook) -> None:
    response = post(hook, ORDER, secrets=["whsec_not-the-secret"])
    assert response.status_code == 401
    assert response.json() == {"message": "signature does not match"}
    tampered = post(hook, ORDER, raw=b'{"data": {"id": 43, "items": [{"sku": "A-1"}]}}',
                    header=signing.header_value([hook.secret], int(time.time()), json.dumps(ORDER).encode(), "d-1"))
    assert tampered.status_code == 401
    assert post(hook, ORDER, header="").status_code == 401  # missing
    assert post(hook, ORDER, header="t=abc,v2=00").status_code == 401
    assert post(hook, ORDER, header=f"t={int(time.time())}").status_code == 401  # no v2
    assert not WorkflowInstance.objects.exists()
    logged = rejections(hook)
    assert [status for status, _ in logged] == [401] * 5
    assert logged[0][1] == "signature does not match"
    assert "missing Steadyflow-Signature header" in logged[2][1]
    # The body is never logged.
    assert not any("A-1" in reason for _, reason in logged)


def test_an_expired_or_future_timestamp_is_refused(hook: Webhook, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "WEBHOOK_REPLAY_WINDOW_S": 300.0}
    old = post(hook, ORDER, at=time.time() - 301)
    assert old.status_code == 403
    assert "replay window of 300 s" in old.json()["message"]
    assert post(hook, ORDER, at=time.time() + 400).status_code == 403
    assert post(hook, ORDER, at=time.time() - 200).status_code == 202  # inside the window
    assert [s for s, _ in rejections(hook)] == [403, 403]


def test_a_replayed_delivery_is_refused_once_outside_the_window(hook: Webhook, settings: Any) -> None:
    """A captured request replayed later: inside the window its delivery id makes it a no-op, after the
    window its timestamp refuses it."""
    settings.STEADYFLOW = {**settings.STEADYFLOW, "WEBHOOK_REPLAY_WINDOW_S": 5.0}
    signed_at = time.time()
    body = json.dumps(ORDER).encode()
    header = signing.header_value([hook.secret], int(signed_at), body, "captured")
    first = post(hook, None, raw=body, header=header, delivery="captured")
    assert first.status_code == 202
    again = post(hook, None, raw=body, header=header, delivery="captured")
    assert again.json()["instance"] == first.json()["instance"]
    # The same bytes, seen 10 s later (the clock moved, not the test: the handler's now is passed in).
    from workflows.triggers import webhooks

    outcome = webhooks.receive(hook.definition.slug, hook.hook_id, body,
                               {"steadyflow-signature": header, "steadyflow-delivery": "replayed-later"},
                               timezone.now() + timedelta(seconds=10))
    assert outcome.status == 403
    assert WorkflowInstance.objects.count() == 1


def test_rotation_accepts_old_and_new_secrets_and_several_v1_values(hook: Webhook) -> None:
    old = hook.secret
    hook.previous_secret, hook.previous_until = old, timezone.now() + timedelta(hours=1)
    hook.secret = "whsec_new"
    hook.save()
    assert post(hook, ORDER, secrets=[old], delivery="a").status_code == 202
    assert post(hook, ORDER, secrets=["whsec_new"], delivery="b").status_code == 202
    # A sender mid-rotation signs with both (one of them unknown here): any match is enough.
    assert post(hook, ORDER, secrets=["whsec_unknown", "whsec_new"], delivery="c").status_code == 202
    hook.previous_until = timezone.now() - timedelta(seconds=1)
    hook.save()
    assert post(hook, ORDER, secrets=[old], delivery="d").status_code == 401


def test_mapping_errors_are_400s_that_name_the_path(hook: Webhook) -> None:
    response = post(hook, {"data": {"id": 1, "items": []}})
    assert response.status_code == 400
    assert response.json()["message"] == "the payload has nothing at 'data.items.0.sku' (no index '0')"
    missing = post(hook, {"other": 1}, delivery="d-2")
    assert missing.status_code == 400 and "'/data/id'" in missing.json()["message"]
    not_json = post(hook, None, raw=b"{nope", delivery="d-3")
    assert not_json.status_code == 400
    nan = post(hook, None, raw=b'{"data": NaN}', delivery="d-4")
    assert nan.status_code == 400 and "NaN" in nan.json()["message"]
    hook.input_mapping = {}
    hook.save()
    array = post(hook, [1, 2], delivery="d-5")
    assert array.status_code == 400 and "must be a JSON object" in array.json()["message"]
    assert [s for s, _ in rejections(hook)] == [400] * 5
    assert not WorkflowInstance.objects.exists()


def test_delivery_id_is_required(hook: Webhook) -> None:
    response = post(hook, ORDER, delivery=None)
    assert response.status_code == 400
    assert "Steadyflow-Delivery" in response.json()["message"]


def test_the_body_is_capped(hook: Webhook, settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "WEBHOOK_MAX_BODY_BYTES": 1024}
    big = {"data": {"id": 1, "items": [{"sku": "x" * 2000}]}}
    response = post(hook, big)
    assert response.status_code == 413
    assert "1024 bytes at most" in response.json()["message"]


def test_unknown_disabled_and_wrong_method(hook: Webhook) -> None:
    client = Client()
    assert client.get(f"/hooks/orders/{hook.hook_id}").status_code == 405
    unknown = post(Webhook(definition=hook.definition, hook_id="nope", secret="x"), ORDER)
    assert unknown.status_code == 404 and unknown.json()["message"] == "no webhook 'nope' on workflow 'orders'"
    hook.enabled = False
    hook.save()
    disabled = post(hook, ORDER)
    assert disabled.status_code == 403
    assert rejections(hook) == [(403, "this webhook is disabled")]
