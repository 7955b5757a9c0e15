"""Receiving a signed webhook: verify, map, start (idempotent on the delivery id), or log why not.

The order matters: the signature is checked over the raw body before anything parses it, and a
rejected delivery leaves a WebhookRejection row with the reason and status (never the body).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

from workflows.engine import strict_json
from workflows.engine.errors import PayloadTooLarge
from workflows.models import WorkflowInstance
from workflows.runtime import start_instance
from workflows.triggers import mapping, signing
from workflows.triggers.models import Webhook, WebhookRejection

log = logging.getLogger("steadyflow.triggers")
MAX_DELIVERY_ID = 100


@dataclass
class Outcome:
    status: int
    body: dict[str, Any] = field(default_factory=dict)
    signed: bool = True  # False: refused before a valid signature (what the rejection limit counts)


def conf(name: str) -> Any:
    return settings.STEADYFLOW[name]


def reject(hook: Webhook, status: int, reason: str, delivery_id: str, now: datetime, *, signed: bool = True
           ) -> Outcome:
    WebhookRejection.objects.create(webhook=hook, status=status, reason=reason[:300],
                                    delivery_id=delivery_id[:MAX_DELIVERY_ID], created_at=now)
    log.info("webhook delivery rejected", extra={"hook": hook.hook_id, "status": status, "reason": reason})
    return Outcome(status, {"message": reason}, signed=signed)


def receive(slug: str, hook_id: str, body: bytes, headers: dict[str, str], now: datetime) -> Outcome:
    """Handle one delivery. `headers` by lower-case name; `body` already capped by the caller."""
    hook = Webhook.objects.select_related("definition").filter(hook_id=hook_id, definition__slug=slug).first()
    if hook is None:
        return Outcome(404, {"message": f"no webhook {hook_id!r} on workflow {slug!r}"}, signed=False)
    delivery_id = headers.get(signing.DELIVERY_HEADER.lower(), "").strip()
    try:
        signing.verify(headers.get(signing.HEADER.lower()), body, hook.secrets_valid_at(now),
                       now=now.timestamp(), window_s=conf("WEBHOOK_REPLAY_WINDOW_S"), delivery_id=delivery_id)
    except signing.SignatureRejected as exc:
        return reject(hook, exc.status, str(exc), delivery_id, now, signed=False)
    # After the signature: only the sender learns that the hook is disabled.
    if not hook.enabled:
        return reject(hook, 403, "this webhook is disabled", delivery_id, now)
    if not delivery_id:
        return reject(hook, 400, f"missing {signing.DELIVERY_HEADER} header (the delivery's unique id)",
                      delivery_id, now)
    if len(delivery_id) > MAX_DELIVERY_ID or not delivery_id.isprintable():
        return reject(hook, 400, f"{signing.DELIVERY_HEADER} must be at most {MAX_DELIVERY_ID} printable "
                      "characters", delivery_id[:MAX_DELIVERY_ID], now)
    if hook.definition.archived:
        return reject(hook, 409, "the workflow is archived", delivery_id, now)
    version = hook.definition.latest_version()
    if version is None:
        return reject(hook, 409, "the workflow has no saved version", delivery_id, now)
    try:
        payload = strict_json.loads(body, "the webhook body") if body else {}
        start_input = mapping.apply(hook.input_mapping, payload)
    except (strict_json.JSONRejected, mapping.MappingError) as exc:
        return reject(hook, 400, str(exc), delivery_id, now)
    key = f"webhook:{hook.hook_id}:{delivery_id}"
    seen = WorkflowInstance.objects.filter(definition_id=hook.definition_id, idempotency_key=key).exists()
    try:
        instance = start_instance(version, start_input, idempotency_key=key, now=now, priority=hook.priority)
    except PayloadTooLarge as exc:
        return reject(hook, 413, str(exc), delivery_id, now)
    except ValueError as exc:  # check_payload: not storable as given
        return reject(hook, 400, str(exc), delivery_id, now)
    return Outcome(202, {"instance": instance.pk, "status": str(instance.status), "duplicate": seen})
