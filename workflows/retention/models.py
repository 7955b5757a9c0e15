"""The daily rollup: per day and definition, the figures the dashboard's daily charts show, written once a
day is over and before retention deletes that day's history (workflows/retention/rollup.py)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from workflows.fields import TolerantDecimalField


class DailyRollup(models.Model):
    """One UTC day of finished instances of one definition (by the day each instance finished); the row
    with no definition holds the day's totals over every definition and marks the day as rolled up."""

    day = models.DateField()
    definition = models.ForeignKey("workflows.WorkflowDefinition", null=True, blank=True,
                                   on_delete=models.CASCADE, related_name="+")
    # Finished instances by final status: {"completed": 12, "failed": 1, ...}
    instances = models.JSONField(default=dict)
    steps_ok = models.PositiveIntegerField(default=0)
    steps_failed = models.PositiveIntegerField(default=0)
    # Histograms {bucket upper bound in ms (as text, "inf" last): count}: step run time (started ->
    # finished) and instance duration (created -> finished); percentiles are read from them.
    step_ms = models.JSONField(default=dict)
    instance_ms = models.JSONField(default=dict)
    tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = TolerantDecimalField(max_digits=16, decimal_places=6, default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "workflows"
        ordering = ["day"]
        constraints = [
            models.UniqueConstraint(fields=["day", "definition"], name="unique_rollup_day_definition"),
            # NULLs are distinct in a unique index: the totals row needs its own.
            models.UniqueConstraint(fields=["day"], condition=Q(definition__isnull=True),
                                    name="unique_rollup_day_totals"),
        ]

    def __str__(self) -> str:
        return f"rollup {self.day} {self.definition_id or 'all'}"
