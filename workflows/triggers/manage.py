"""Managing a workflow's webhooks: what the triggers page and the v1 API both do to them.

A webhook's secret leaves the server only in what `create` and `rotate` return, for the caller to show
once (the page keeps it in the session until the next view; the API answers it in that response).
Schedules are managed through workflows/triggers/schedules.py (create, set_enabled).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from workflows.engine.priorities import NORMAL
from workflows.triggers import mapping
from workflows.triggers.models import Webhook, new_secret

ROTATION_GRACE_S = 86400  # how long a rotated-out secret still verifies deliveries
MAX_NAME = 100


def create_webhook(definition: Any, name: str, input_mapping: Any, now: datetime,
                   priority: str = NORMAL) -> Webhook:
    """A new enabled webhook with a fresh secret; raises mapping.MappingError for a bad input mapping.
    `priority`: the instances it starts (high, normal or low; engine/priorities.py)."""
    checked = mapping.check_mapping(input_mapping if input_mapping is not None else {})
    hook: Webhook = Webhook.objects.create(definition=definition, name=(name or "")[:MAX_NAME],
                                           input_mapping=checked, created_at=now, priority=priority)
    return hook


def rotate_secret(hook: Webhook, now: datetime) -> str:
    """Give the webhook a new secret; the old one keeps verifying for ROTATION_GRACE_S. Returns the new one."""
    hook.previous_secret, hook.previous_until = hook.secret, now + timedelta(seconds=ROTATION_GRACE_S)
    hook.secret = new_secret()  # type: ignore[assignment]  # the field's descriptor stores a str
    hook.save(update_fields=["secret", "previous_secret", "previous_until"])
    return hook.secret


def set_enabled(hook: Webhook, enabled: bool) -> None:
    hook.enabled = enabled
    hook.save(update_fields=["enabled"])
