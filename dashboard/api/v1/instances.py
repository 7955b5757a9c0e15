"""v1 instances: start (one or many), read, list, cancel, retry a step, rerun from a node, follow events.

The work is done by the services the dashboard's endpoints call too (dashboard/api/services.py's
start_workflow, workflows/operators/operations.py); this module parses, checks scope and permissions, and
answers in the shapes both APIs share (dashboard/api/shapes.py: instance_json is the CLI's run summary
keyed by `id`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest
from ninja import Field, Header, Query, Router, Schema, Status
from pydantic import field_validator

from dashboard.api.services import MAX_IDEMPOTENCY_KEY, start_workflow
from dashboard.api.shapes import events_after, instance_json, report_for, step_json
from dashboard.api.v1 import following, stream_slots
from dashboard.api.v1.auth import has_scope, need
from dashboard.api.v1.pages import PAGE_MOST, cursor_field, newest_first
from dashboard.api.v1.problems import Problem
from dashboard.security import permissions
from workflows.engine.statuses import InstanceStatus
from workflows.models import WorkflowInstance, WorkflowVersion
from workflows.operators import operations

router = Router(tags=["instances"])
VIEW = permissions.VIEW_INSTANCES


def traceparent_header() -> Any:
    return Header(None, alias="traceparent", description=(
        "A W3C trace context header (`00-<trace id>-<span id>-<flags>`): the instance joins the caller's "
        "trace, its span a child of the caller's. An invalid value is ignored."))
Priority = Literal["high", "normal", "low"]
PRIORITY_DOC = ("high, normal or low: high work is taken before normal, normal before low, and low is "
                "never starved (docs/architecture.md, Priorities).")


class StartIn(Schema):
    input: dict[str, Any] = Field(default_factory=dict, description="The start input (the initial context).")
    priority: Priority = Field("normal", description=PRIORITY_DOC)


class StartManyIn(Schema):
    inputs: list[dict[str, Any]] = Field(min_length=1, max_length=1000)
    priority: Priority = Field("normal", description=PRIORITY_DOC + " One for every instance started.")
    idempotency_keys: list[str | None] | None = Field(
        None, description="One key (or null) per input; a key used before returns that instance.")


class NoteIn(Schema):
    note: str = Field("", max_length=2000)


class RetryIn(NoteIn):
    step: int | None = Field(None, description="The failed step run to retry (default: the latest failed).")


class RerunIn(NoteIn):
    node: str = Field(min_length=1, max_length=200, description="The node to run again from.")


def instance_or_404(instance_id: int) -> WorkflowInstance:
    instance: WorkflowInstance | None = WorkflowInstance.objects.select_related("version__definition").filter(
        pk=instance_id).first()
    if instance is None:
        raise Problem(404, f"instance {instance_id} does not exist")
    return instance


@router.post("/workflows/{slug}/instances", response={201: dict[str, Any]}, summary="Start an instance")
def start(request: HttpRequest, slug: str, body: StartIn,
          idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=MAX_IDEMPOTENCY_KEY),
          traceparent: str | None = traceparent_header()) -> Status[dict[str, Any]]:
    """Start the workflow's latest version. A repeated `Idempotency-Key` (per workflow) answers the
    instance the first request started instead of starting another. A W3C `traceparent` header puts
    the instance's spans in the caller's trace (an invalid one is ignored)."""
    need(request, "run", permissions.START)
    instance = start_workflow(slug, [body.input], [idempotency_key or None], request.user, traceparent,
                              body.priority)[0]
    return Status(201, instance_json(instance))


@router.post("/workflows/{slug}/instances/bulk", response={201: dict[str, Any]}, summary="Start many instances")
def start_many(request: HttpRequest, slug: str, body: StartManyIn,
               traceparent: str | None = traceparent_header()) -> Status[dict[str, Any]]:
    """Start one instance per input in one transaction."""
    need(request, "run", permissions.START)
    keys = body.idempotency_keys
    if keys is not None and len(keys) != len(body.inputs):
        raise Problem(422, "one idempotency key (or null) per input",
                      [{"field": "body.idempotency_keys", "message": f"expected {len(body.inputs)} keys"}])
    instances = start_workflow(slug, body.inputs, keys, request.user, traceparent, body.priority)
    return Status(201, {"instances": [instance_json(instance) for instance in instances]})


@router.get("/instances/{instance_id}", response=dict[str, Any], summary="Get an instance")
def get(request: HttpRequest, instance_id: int) -> dict[str, Any]:
    need(request, "read", VIEW)
    return instance_json(instance_or_404(instance_id))


@router.get("/instances/{instance_id}/report", response=dict[str, Any], summary="An instance's run report")
def report(request: HttpRequest, instance_id: int) -> dict[str, Any]:
    """The run report (docs/site.md): the path taken, per step and per node attempts, retries,
    durations, tokens, cost, tool calls and cache hits, halts and decisions, totals. The same document
    as `/api/instances/<id>/report` (dates ISO 8601, money as strings)."""
    need(request, "read", VIEW)
    document: dict[str, Any] = json.loads(json.dumps(report_for(instance_or_404(instance_id)),
                                                     cls=DjangoJSONEncoder))
    return document


class ListFilters(Schema):
    workflow: str | None = Field(None, max_length=200, description="A workflow's slug.")
    status: InstanceStatus | None = None
    created_after: datetime | None = Field(None, description="ISO 8601; inclusive.")
    created_before: datetime | None = Field(None, description="ISO 8601; exclusive.")
    cursor: str | None = cursor_field()
    limit: int = Field(50, ge=1, le=PAGE_MOST)

    @field_validator("created_after", "created_before")
    @classmethod
    def in_utc(cls, value: datetime | None) -> datetime | None:
        """In UTC (naive means UTC): PostgreSQL takes offsets only up to ±15:59, Python up to ±23:59."""
        if value is None:
            return None
        try:
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        except OverflowError:
            raise ValueError("out of range once converted to UTC") from None


@router.get("/instances", response=dict[str, Any], summary="List instances")
def list_instances(request: HttpRequest, filters: Query[ListFilters]) -> dict[str, Any]:
    """Newest first, `limit` at a time; follow `next_cursor` (null on the last page). A cursor is stable
    under concurrent starts: it continues below the last id seen."""
    need(request, "read", VIEW)
    rows = WorkflowInstance.objects.select_related("version__definition")
    if filters.workflow:
        # Through the version ids, as the instance list page does: an indexed IN, no join to filter on.
        versions = list(WorkflowVersion.objects.filter(definition__slug=filters.workflow).values_list("pk", flat=True))
        rows = rows.filter(version_id__in=versions)
    if filters.status:
        rows = rows.filter(status=filters.status)
    if filters.created_after:
        rows = rows.filter(created_at__gte=filters.created_after)
    if filters.created_before:
        rows = rows.filter(created_at__lt=filters.created_before)
    return newest_first(rows, filters.cursor, filters.limit, instance_json)


@router.get("/instances/{instance_id}/events", response=dict[str, Any], summary="Events after a sequence number")
def events(request: HttpRequest, instance_id: int, after: int = Query(0, ge=0, le=2**62),
           limit: int = Query(500, ge=1, le=1000),
           wait: int = Query(0, ge=0, le=following.WAIT_MOST_S, description=(
               "Long poll: when there is no event after `after` yet, wait up to this many seconds for one "
               "(answered as soon as one is committed; an empty list when the wait ends or the instance is "
               "final)."))) -> dict[str, Any]:
    """The instance's events with `seq` > `after`, oldest first. Poll with `after` = the last `seq` seen
    (or `last_seq`) to follow an instance; add `wait` to long-poll. `…/events/stream` is the same as
    server-sent events."""
    need(request, "read", VIEW)
    instance = instance_or_404(instance_id)
    if wait == 0:
        return events_after(instance, after, limit)
    with stream_slots.held(request.user.pk):  # a long poll holds a thread: capped (429 past the cap)
        return following.wait_for_events(instance.pk, after, limit, wait)


def _done(instance_id: int, **extra: Any) -> dict[str, Any]:
    return {"instance": instance_json(instance_or_404(instance_id)), **extra}


def _operate(action: Any) -> Any:
    try:
        return action()
    except operations.OperationError as exc:
        raise Problem(exc.status, exc.message) from None


@router.post("/instances/{instance_id}/cancel", response=dict[str, Any], summary="Cancel an instance")
def cancel(request: HttpRequest, instance_id: int, body: NoteIn) -> dict[str, Any]:
    """Operators cancel any instance; whoever may start instances cancels the ones they started (with
    the `run` scope for a token; `operate` cancels any)."""
    need(request, "read", VIEW)
    instance = instance_or_404(instance_id)
    refused = operations.cancel_refusal(request.user, instance)
    if refused is not None:
        raise Problem(403, refused)
    own = instance.created_by_id is not None and instance.created_by_id == request.user.pk
    if not has_scope(request, "operate") and not (own and has_scope(request, "run")):
        raise Problem(403, "this token needs the 'operate' scope (or 'run', for an instance its user started)")
    _operate(lambda: operations.cancel(instance_id, request.user, note=body.note))
    return _done(instance_id)


@router.post("/instances/{instance_id}/retry", response=dict[str, Any], summary="Retry a failed step")
def retry(request: HttpRequest, instance_id: int, body: RetryIn) -> dict[str, Any]:
    need(request, "operate", VIEW, permissions.OPERATE)
    instance_or_404(instance_id)
    step = _operate(lambda: operations.retry_failed_step(instance_id, request.user, step_id=body.step,
                                                         note=body.note))
    return _done(instance_id, step=step_json(step))


@router.post("/instances/{instance_id}/rerun", response=dict[str, Any], summary="Rerun from a node")
def rerun(request: HttpRequest, instance_id: int, body: RerunIn) -> dict[str, Any]:
    need(request, "operate", VIEW, permissions.OPERATE)
    instance_or_404(instance_id)
    step = _operate(lambda: operations.rerun_from_node(instance_id, body.node, request.user, note=body.note))
    return _done(instance_id, step=step_json(step))
