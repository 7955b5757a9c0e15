"""The rows behind webhooks, schedules and notifications (app label `workflows`)."""

from __future__ import annotations

import secrets
from typing import Any

from django.db import models
from django.utils import timezone as dj_timezone

from workflows.engine.priorities import NORMAL, PRIORITIES
from workflows.fields import EncryptedTextField


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def new_hook_id() -> str:
    return secrets.token_urlsafe(12)


class Webhook(models.Model):
    """An incoming webhook URL for one definition: POST /hooks/<slug>/<hook_id>, signed with `secret`.

    The secret is needed in clear to verify HMACs, so it is encrypted at rest with the credentials keys
    (EncryptedTextField), not hashed; it is never shown after creation (not in the admin, not on the
    pages). `previous_secret` keeps working until `previous_until` after
    a rotation, so senders can switch without a gap."""

    definition = models.ForeignKey("workflows.WorkflowDefinition", on_delete=models.CASCADE,
                                   related_name="webhooks")
    hook_id = models.CharField(max_length=32, unique=True, default=new_hook_id)
    name = models.CharField(max_length=100, blank=True)
    secret = EncryptedTextField(default=new_secret)
    previous_secret = EncryptedTextField(blank=True)
    previous_until = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    # {input field: JSON pointer ("/a/0/b") or dotted path ("a.0.b") into the payload}; empty: the
    # whole payload (an object) is the start input.
    input_mapping = models.JSONField(default=dict, blank=True)
    # high / normal / low: the priority of the instances it starts (engine/priorities.py).
    priority = models.CharField(max_length=8, choices=[(p, p) for p in PRIORITIES], default=NORMAL)
    created_at = models.DateTimeField(default=dj_timezone.now)

    class Meta:
        app_label = "workflows"
        ordering = ["definition", "created_at"]

    def __str__(self) -> str:
        return f"webhook {self.hook_id} of {self.definition_id}"

    def secrets_valid_at(self, now: Any) -> list[str]:
        # str(): the fields hold the clear text once loaded (EncryptedTextField decrypts).
        valid = [str(self.secret)]
        if self.previous_secret and self.previous_until is not None and now < self.previous_until:
            valid.append(str(self.previous_secret))
        return valid


class WebhookRejection(models.Model):
    """A delivery a webhook refused, and why (never the body)."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="rejections")
    reason = models.CharField(max_length=300)
    status = models.PositiveSmallIntegerField()
    delivery_id = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(default=dj_timezone.now, db_index=True)

    class Meta:
        app_label = "workflows"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.status} {self.reason}"


class CatchUp(models.TextChoices):
    SKIP = "skip"  # ticks missed while no scheduler ran are not run
    ONCE = "once"  # the most recent missed tick runs once


class Schedule(models.Model):
    """A cron expression (five fields, in `timezone`) that starts the definition's latest version."""

    definition = models.ForeignKey("workflows.WorkflowDefinition", on_delete=models.CASCADE,
                                   related_name="schedules")
    cron = models.CharField(max_length=100)
    timezone = models.CharField(max_length=64, default="UTC")
    enabled = models.BooleanField(default=True)
    catch_up = models.CharField(max_length=8, choices=CatchUp.choices, default=CatchUp.SKIP)
    input = models.JSONField(default=dict, blank=True)
    next_fire_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    # high / normal / low: the priority of the instances it starts (engine/priorities.py).
    priority = models.CharField(max_length=8, choices=[(p, p) for p in PRIORITIES], default=NORMAL)
    created_at = models.DateTimeField(default=dj_timezone.now)

    class Meta:
        app_label = "workflows"
        ordering = ["definition", "created_at"]

    def __str__(self) -> str:
        return f"{self.cron} ({self.timezone})"


class ScheduleFire(models.Model):
    """One tick of a schedule, fired: the unique constraint makes a tick fire once across every
    scheduler process (the insert that wins starts the instance in the same transaction)."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="fires")
    fire_at = models.DateTimeField()
    instance = models.ForeignKey("workflows.WorkflowInstance", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    missed = models.BooleanField(default=False)  # a catch-up run (policy once) of a missed tick
    created_at = models.DateTimeField(default=dj_timezone.now)

    class Meta:
        app_label = "workflows"
        ordering = ["-fire_at"]
        constraints = [models.UniqueConstraint(fields=["schedule", "fire_at"], name="unique_schedule_tick")]

    def __str__(self) -> str:
        return f"{self.schedule_id} @ {self.fire_at.isoformat()}"


class ChannelKind(models.TextChoices):
    EMAIL = "email"
    WEBHOOK = "webhook"
    SLACK = "slack"  # a Slack-compatible incoming webhook (its URL is the secret): notifications.send_slack


NOTIFY_EVENTS = ("review", "failed", "human_task")


def all_events() -> list[str]:
    return list(NOTIFY_EVENTS)


class NotificationChannel(models.Model):
    """Where notices go: email addresses (comma-separated) or a webhook URL, for the events listed."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=8, choices=ChannelKind.choices)
    target = models.CharField(max_length=1000, help_text="email: addresses, comma-separated; webhook or slack: URL")
    events = models.JSONField(default=all_events, help_text="any of: review, failed, human_task")
    # Email channels only: its recipients may approve or reject, from the notice's links and without an
    # account, the items this group may decide (a human task of that group; halts when it is "operators").
    # Empty: the links ask the approver to log in (workflows/triggers/action_links.py).
    approver_group = models.CharField(max_length=150, blank=True, help_text=(
        "email only: recipients decide items of this group from the emailed links, without an account"))
    # Webhook channels sign their requests with it (never shown back in the admin).
    secret = EncryptedTextField(default=new_secret, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=dj_timezone.now)

    class Meta:
        app_label = "workflows"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def recipients(self) -> list[str]:
        """An email channel's addresses."""
        return [a.strip() for a in self.target.split(",") if a.strip()]


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    GAVE_UP = "gave_up"


class NotificationDelivery(models.Model):
    """One notice to one channel; retried with backoff until delivered or out of attempts."""

    channel = models.ForeignKey(NotificationChannel, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=16)
    instance = models.ForeignKey("workflows.WorkflowInstance", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    review = models.ForeignKey("workflows.ReviewItem", null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=dj_timezone.now)

    class Meta:
        app_label = "workflows"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notify_due")]

    def __str__(self) -> str:
        return f"{self.event} -> {self.channel_id} ({self.status})"


class DeliveryAttempt(models.Model):
    """The log of one attempt: when, the response code (or error), and when the next one is due."""

    delivery = models.ForeignKey(NotificationDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    ok = models.BooleanField(default=False)
    error = models.CharField(max_length=300, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=dj_timezone.now)

    class Meta:
        app_label = "workflows"
        ordering = ["delivery", "number"]

    def __str__(self) -> str:
        return f"attempt {self.number}: {self.status_code or self.error}"
