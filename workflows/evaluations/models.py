"""Datasets and evaluations (their rows belong to the workflows app)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Dataset(models.Model):
    definition = models.ForeignKey("workflows.WorkflowDefinition", on_delete=models.CASCADE, related_name="datasets")
    name = models.SlugField(max_length=100)
    description = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "workflows"
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["definition", "name"], name="unique_dataset_name")]

    def __str__(self) -> str:
        return f"{self.definition.slug}/{self.name}"


class DatasetRow(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="rows")
    number = models.PositiveIntegerField()  # 1-based, as in the JSONL file
    input = models.JSONField(default=dict)
    expect = models.JSONField(default=list)  # a list of expectations (expectations.py)
    label = models.CharField(max_length=200, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["dataset", "number"]
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="unique_dataset_row")]


class EvaluationStatus(models.TextChoices):
    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"


class Evaluation(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="evaluations")
    version = models.ForeignKey("workflows.WorkflowVersion", on_delete=models.PROTECT, related_name="+")
    # The generated copy the rows run on (`<slug>--eval`): its instances stay out of production's figures.
    run_version = models.ForeignKey("workflows.WorkflowVersion", on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=10, choices=EvaluationStatus.choices, default=EvaluationStatus.RUNNING)
    concurrency = models.PositiveSmallIntegerField(default=4)
    summary = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"evaluation {self.pk} of {self.version} on {self.dataset.name}"


class ResultStatus(models.TextChoices):
    PENDING = "pending"  # not started yet (waits for a concurrency slot)
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"  # ran, an expectation did not hold
    ERROR = "error"  # the instance did not complete (failed, halted, cancelled, timed out)


class EvaluationResult(models.Model):
    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="results")
    row = models.ForeignKey(DatasetRow, on_delete=models.CASCADE, related_name="+")
    instance = models.ForeignKey("workflows.WorkflowInstance", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    status = models.CharField(max_length=10, choices=ResultStatus.choices, default=ResultStatus.PENDING)
    output = models.JSONField(null=True, blank=True)
    checks = models.JSONField(default=list)  # [{"expectation": ..., "passed": bool, "detail": str}]
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        app_label = "workflows"
        ordering = ["evaluation", "row__number"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "row"], name="unique_evaluation_row")]
