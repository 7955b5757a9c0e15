"""Definitions, versions, instances, step runs, the event log and checkpoints.

The database is the source of truth: Redis only carries job ids. Hot-path writes live in
runtime.py; behaviour that belongs to one row lives here.
"""

from __future__ import annotations

import enum
import hashlib
import json
import secrets
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from workflows.engine.graph import Graph
from workflows.engine.statuses import InstanceStatus, StepStatus
from workflows.fields import ContextField, TolerantDecimalField

# The step statuses the scheduler looks for by due time (its partial index below).
STEP_WAITING_TO_RUN = [StepStatus.PENDING.value, StepStatus.QUEUED.value, StepStatus.RETRYING.value]


def new_trace_id() -> str:
    """A W3C traceparent: version 00, 16-byte trace id, 8-byte parent span id, sampled."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def status_choices(statuses: type[enum.StrEnum]) -> list[tuple[str, str]]:
    """Field choices for one of the engine's status enums, exactly as Django's TextChoices made them
    (label = the member name, title-cased) so the migrations' recorded choices stay unchanged."""
    return [(member.value, member.name.replace("_", " ").title()) for member in statuses]


class WorkflowDefinition(models.Model):
    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    archived = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def latest_version(self) -> WorkflowVersion | None:
        return self.versions.order_by("-number").first()


class ImmutableVersion(Exception):
    pass


class WorkflowVersion(models.Model):
    """One immutable version of a definition's graph. Running instances keep the one they started on."""

    definition = models.ForeignKey(WorkflowDefinition, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    graph = models.JSONField()
    checksum = models.CharField(max_length=64)
    message = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["definition", "number"], name="unique_version_number")]
        ordering = ["definition", "-number"]

    def __str__(self) -> str:
        return f"{self.definition.slug} v{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ImmutableVersion("workflow versions are immutable: save a new version instead")
        self.checksum = hashlib.sha256(canonical_json(self.graph)).hexdigest()
        super().save(*args, **kwargs)

    def as_graph(self) -> Graph:
        return Graph.from_json(self.graph)


class WorkflowInstance(models.Model):
    version = models.ForeignKey(WorkflowVersion, on_delete=models.PROTECT, related_name="instances")
    status = models.CharField(max_length=16, choices=status_choices(InstanceStatus),
                              default=InstanceStatus.PENDING.value)
    # No index of its own on status (nor its varchar_pattern_ops twin): instance_status_deadline leads with
    # it. Each was one more entry per INSERT and status-changing UPDATE (migration 0023).
    input = models.JSONField(default=dict)
    # The current context is not this column: it is the newest snapshot (Checkpoint) plus the state
    # deltas after it (StateDelta); reading `instance.context` on a loaded instance rebuilds it
    # (workflows/fields.py, store/state_reads.py). The column holds the context the instance was
    # created with: the base while it has no snapshot. See docs/DESIGN.md "State: deltas and snapshots".
    context = ContextField(default=dict)
    # Scheduler state: visits per node and pending joins (see engine/scheduling.py).
    state = models.JSONField(default=dict)
    loop_count = models.PositiveIntegerField(default=0)
    max_transitions = models.PositiveIntegerField()
    deadline = models.DateTimeField(null=True, blank=True)
    open_steps = models.IntegerField(default=0)  # steps not yet finished: 0 and an end reached = done
    event_seq = models.PositiveIntegerField(default=0)
    trace_id = models.CharField(max_length=55, default=new_trace_id)
    # Unique per definition (Meta.constraints): the same key on another workflow is another start.
    # A client's key (at most 200 characters) is stored with its namespace's prefix (runtime/starting.py).
    idempotency_key = models.CharField(max_length=210, null=True, blank=True)
    halt_reason = models.CharField(max_length=32, blank=True)
    error = models.JSONField(null=True, blank=True)
    tokens = models.PositiveBigIntegerField(default=0)
    # Tolerant: a value past max_digits already in an SQLite database must not break every page.
    cost_usd = TolerantDecimalField(max_digits=14, decimal_places=6, default=0)
    budget_usd = TolerantDecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The version's definition, kept on the row so the idempotency key can be unique per definition.
    # Last, so the SQL stores' column list (store/statements.py) only grew at its end. No index of
    # its own: the unique (definition, idempotency_key) index leads with it.
    definition = models.ForeignKey(WorkflowDefinition, on_delete=models.PROTECT, related_name="+",
                                   db_index=False)
    # A sub-workflow's link to the parent step that started it (engine/nodes/subworkflow.py); the
    # parent step's children are `step.child_instances`. Last, like `definition`, for the SQL
    # stores' column list. Its depth (1 for a child of a top-level instance) is in state["depth"].
    parent_step = models.ForeignKey("StepRun", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="child_instances")
    # high / normal / low, set at start (engine/priorities.py): its steps' queues. Last, for the
    # SQL stores' column list.
    priority = models.CharField(max_length=8, default="normal")
    # State bookkeeping (docs/DESIGN.md "State: deltas and snapshots"), last for the SQL stores'
    # column list: the event seq of the last context change (the process cache's key), of the newest
    # snapshot, its size, and the bytes of deltas written since it (the snapshot policy's inputs).
    context_seq = models.PositiveIntegerField(default=0)
    snapshot_seq = models.PositiveIntegerField(default=0)
    snapshot_bytes = models.PositiveBigIntegerField(default=0)
    delta_bytes = models.PositiveBigIntegerField(default=0)
    # The context's JSON size (engine/deltas.json_size; 0: not known yet), kept so the payload
    # limit is checked from the changed keys alone.
    context_bytes = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["status", "deadline"], name="instance_status_deadline"),
            models.Index(fields=["trace_id"], name="instance_trace_id"),  # search by trace id
            # Retention and the daily rollup walk finished instances by the day they ended.
            models.Index(fields=["finished_at"], name="instance_finished_at"),
        ]
        constraints = [
            # A repeated key returns the instance it started, on its own workflow only (rows without a
            # key are NULL there, which never conflicts).
            models.UniqueConstraint(fields=["definition", "idempotency_key"], name="unique_instance_idempotency_key"),
        ]
        permissions = [("operate_workflowinstance", "Can cancel, retry and decide reviews of instances")]

    def __str__(self) -> str:
        return f"instance {self.pk} ({self.status})"

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> WorkflowInstance:
        """A loaded instance's `context` is rebuilt on first read (fields.CurrentContext): the column
        read here is only the base of an instance without a snapshot, kept aside for that."""
        instance: WorkflowInstance = super().from_db(db, field_names, values)
        if "context" in instance.__dict__:
            instance.__dict__["_context_column"] = instance.__dict__.pop("context")
        return instance

    def get_deferred_fields(self) -> set[str]:
        # Not deferred, only rebuilt on first read: refresh_from_db copies it, save() writes it.
        deferred: set[str] = super().get_deferred_fields()
        if "_context_column" in self.__dict__:
            deferred.discard("context")
        return deferred

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.definition_id is None and self.version_id is not None:
            self.definition = self.version.definition  # the one it runs; bulk starts set it themselves
        super().save(*args, **kwargs)

    @property
    def is_final(self) -> bool:
        from workflows.engine.statuses import INSTANCE_FINAL

        return self.status in INSTANCE_FINAL


class StepRun(models.Model):
    """One execution of one node in one instance. (instance, node, visit) is unique: a step's result
    commits at most once; retries are attempts of the same row."""

    # No index of its own: the unique (instance, node_id, visit) index leads with it, and each index is
    # one more entry a step's INSERT and each of its (never HOT) UPDATEs write (docs/DESIGN.md).
    instance = models.ForeignKey(WorkflowInstance, on_delete=models.CASCADE, related_name="steps", db_index=False)
    node_id = models.CharField(max_length=64)
    node_type = models.CharField(max_length=32)
    visit = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=status_choices(StepStatus),
                              default=StepStatus.QUEUED.value)
    queue = models.CharField(max_length=16)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    lease_token = models.CharField(max_length=32, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=200)
    trace_id = models.CharField(max_length=55)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    degraded = models.BooleanField(default=False)
    # Its node's priority, else its instance's: which queue of its kind carries it (the reconciler
    # re-dispatches it there). Last, for the SQL stores' column list.
    priority = models.CharField(max_length=8, default="normal")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["instance", "node_id", "visit"], name="unique_step_visit"),
        ]
        # Partial on PostgreSQL: each index holds only the rows its readers look for, so it grows with the
        # open work, not with history, and a step's writes add fewer index entries (a step that finishes
        # is in neither status index: its UPDATE adds 3 entries, not 5; its INSERT as queued or running,
        # 3). SQLite has full indexes under these names (migration 0021 says why).
        indexes = [
            # The scheduler's due steps: pending/retrying past their due_at, queued ones whose job is late.
            models.Index(fields=["status", "due_at"], name="step_open_due",
                         condition=models.Q(status__in=STEP_WAITING_TO_RUN)),
            # The scheduler's expired leases.
            models.Index(fields=["lease_until"], name="step_running_lease",
                         condition=models.Q(status=StepStatus.RUNNING.value)),
            # The dashboard's last hour.
            models.Index(fields=["finished_at"], name="step_finished",
                         condition=models.Q(finished_at__isnull=False)),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.node_id}#{self.visit} ({self.status})"

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None


class Event(models.Model):
    """Append-only log per instance, written in the same transaction as the change it records."""

    # No index of its own: the unique (instance, seq) index leads with it.
    instance = models.ForeignKey(WorkflowInstance, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    node_id = models.CharField(max_length=64, blank=True)
    # The step the event is about, always one of the same instance's: the two are written in one transaction
    # and deleted together (retention deletes an instance's events before its steps), so the column has no
    # foreign key constraint and no index of its own (nothing looks events up by step). Each cost every event
    # a btree entry, a trigger query at COMMIT and a row lock (a WAL record) on its step: ~310 of a W1
    # step's ~3,580 WAL bytes (migration 0022).
    step = models.ForeignKey(StepRun, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="+",
                             db_constraint=False, db_index=False)
    payload = models.JSONField(default=dict)
    # No trace id of its own: it is the instance's (a copy on every row was 56 bytes per event, never read).
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["instance", "seq"], name="unique_event_seq")]
        ordering = ["instance", "seq"]

    def __str__(self) -> str:
        return f"{self.instance_id}#{self.seq} {self.type}"

    def as_message(self) -> dict[str, Any]:
        return {
            "instance": self.instance_id,
            "seq": self.seq,
            "type": self.type,
            "node": self.node_id,
            "step": self.step_id,
            "payload": self.payload,
            "at": self.created_at.isoformat(),
        }


class Checkpoint(models.Model):
    """A snapshot: the instance's whole state at a seq, with a checksum. Written when the policy says
    (runtime/snapshots.py), not every step; the state after it is this plus the StateDeltas after
    its seq. Recovery takes the newest that verifies."""

    # No index of its own: checkpoint_latest (instance, -seq) leads with it.
    instance = models.ForeignKey(WorkflowInstance, on_delete=models.CASCADE, related_name="checkpoints",
                                 db_index=False)
    seq = models.PositiveIntegerField()  # the event seq it was taken at
    state = models.JSONField()
    checksum = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    # Not a column: the context with its references to deltas followed, set by the reader that
    # verified them (store/state_reads.py newest_snapshot).
    resolved_context: dict[str, Any] | None = None

    class Meta:
        ordering = ["instance", "-seq"]
        indexes = [models.Index(fields=["instance", "-seq"], name="checkpoint_latest")]

    @staticmethod
    def checksum_of(state: dict[str, Any]) -> str:
        return hashlib.sha256(canonical_json(state)).hexdigest()

    def verifies(self) -> bool:
        return self.checksum == self.checksum_of(self.state)


class StateDelta(models.Model):
    """What one transition changed in the context: {"set": {key: value}, "unset": [key, ...]}, at the
    event seq the transition ended on, with a checksum over (seq, delta) so a damaged row is detected
    (deltas.checksum_of)."""

    # No index of its own: statedelta_instance_seq (instance, seq) leads with it.
    instance = models.ForeignKey(WorkflowInstance, on_delete=models.CASCADE, related_name="deltas", db_index=False)
    seq = models.PositiveIntegerField()
    delta = models.JSONField()
    checksum = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["instance", "seq"], name="statedelta_instance_seq")]

    def verifies(self) -> bool:
        from workflows.engine.deltas import checksum_of

        return self.checksum == checksum_of(self.seq, self.delta)


class BreakerState(models.Model):
    """A circuit breaker per LLM provider/model, shared by every worker process (see engine/breaker.py)."""

    key = models.CharField(max_length=200, unique=True)
    state = models.CharField(max_length=16, default="closed")
    buckets = models.JSONField(default=dict)  # window bucket start (epoch s) -> [calls, failures]
    opened_at = models.FloatField(null=True, blank=True)
    trial_started_at = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"{self.key}: {self.state}"


class LLMCacheEntry(models.Model):
    """A stored llm reply (workflows/adapters/llm_cache.py): an opted-in node making the same call within the TTL
    gets it back instead of calling its provider. Per workflow; shared by every worker."""

    workflow = models.ForeignKey(WorkflowDefinition, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=64)  # workflows/engine/llm_cache.py key_for
    node_id = models.CharField(max_length=64, blank=True)
    output = models.JSONField()
    usage = models.JSONField(default=dict)
    # The step whose call produced the reply (hits link to it); kept as a plain id so deleting history
    # does not touch the cache.
    source_step = models.BigIntegerField(null=True, blank=True)
    source_instance = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)  # the scheduler purges rows past it
    hits = models.PositiveIntegerField(default=0)
    last_hit_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workflow", "key"], name="unique_llm_cache_key")]
        ordering = ["-created_at"]
        verbose_name = "LLM cache entry"
        verbose_name_plural = "LLM cache entries"

    def __str__(self) -> str:
        return f"{self.node_id} {self.key[:12]}"


# Credentials (workflows/credentials/), evaluations (workflows/evaluations/), review items and the audit
# trail (workflows/operators/), retention's daily rollup (workflows/retention/) and triggers and
# notifications (workflows/triggers/): their rows belong to this app.
from workflows.credentials.models import Credential, CredentialKind  # noqa: E402, F401
from workflows.evaluations.models import (  # noqa: E402, F401
    Dataset,
    DatasetRow,
    Evaluation,
    EvaluationResult,
)
from workflows.operators.models import AuditEntry, ReviewItem, ReviewReason, ReviewStatus  # noqa: E402, F401
from workflows.retention.models import DailyRollup  # noqa: E402, F401
from workflows.triggers.models import (  # noqa: E402, F401
    DeliveryAttempt,
    NotificationChannel,
    NotificationDelivery,
    Schedule,
    ScheduleFire,
    Webhook,
    WebhookRejection,
)
