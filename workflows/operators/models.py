"""The review inbox's rows and the operators' audit trail: rows of the `workflows` app (workflows.models
imports them), here with the operators' code that decides them (workflows/operators/review.py). The runtime
opens review items at halts and human tasks."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ReviewReason(models.TextChoices):
    LOOP_BREAKER = "loop_breaker"
    CIRCUIT_OPEN = "circuit_open"
    TTL_EXPIRED = "ttl_expired"
    BUDGET_EXCEEDED = "budget_exceeded"
    COMPENSATION_FAILED = "compensation_failed"
    POISON_STEP = "poison_step"
    HUMAN_TASK = "human_task"


class ReviewStatus(models.TextChoices):
    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    CLOSED = "closed"  # the instance ended another way (cancelled, expired) before anyone decided


class ReviewItem(models.Model):
    """The manual review queue: one item per halt, or per human task."""

    instance = models.ForeignKey("workflows.WorkflowInstance", on_delete=models.CASCADE, related_name="reviews")
    step = models.ForeignKey("workflows.StepRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    node_id = models.CharField(max_length=64, blank=True)
    reason = models.CharField(max_length=32, choices=ReviewReason.choices, db_index=True)
    status = models.CharField(max_length=16, choices=ReviewStatus.choices, default=ReviewStatus.OPEN)
    details = models.JSONField(default=dict)
    decision = models.JSONField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True)
    assignee_group = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "created_at"], name="review_status_created")]
        permissions = [("decide_reviewitem", "Can decide review items")]

    def __str__(self) -> str:
        return f"{self.get_reason_display()} on instance {self.instance_id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == ReviewStatus.OPEN


class AuditEntry(models.Model):
    """Who did what to an instance, with the state before and after. Append-only."""

    instance = models.ForeignKey("workflows.WorkflowInstance", on_delete=models.CASCADE, related_name="audit")
    review = models.ForeignKey(ReviewItem, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    action = models.CharField(max_length=40)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.action} by {self.actor} on {self.instance_id}"
