"""v1 triggers: a workflow's schedules and webhooks (list, create, enable/disable, delete; a webhook's
secret rotated). Reads need the `read` scope; changes `design` and the right to change workflows.

The checks and changes are the triggers page's (dashboard/pages/trigger_views.py): workflows/triggers/
schedules.py and manage.py. A webhook's secret is answered once, by the create and rotate responses.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse
from ninja import Field, Router, Schema, Status

from dashboard.api.services import definition_or_404
from dashboard.api.v1.auth import need
from dashboard.api.v1.problems import Problem
from dashboard.security import permissions
from workflows import clock
from workflows.models import WorkflowDefinition
from workflows.triggers import manage, mapping, schedules
from workflows.triggers.models import CatchUp, Schedule, Webhook

router = Router(tags=["triggers"])
VIEW = permissions.VIEW_GRAPHS
CHANGE = permissions.CHANGE_WORKFLOW
NEXT_FIRES = 5


def _stamp(moment: Any) -> str | None:
    return moment.isoformat() if moment is not None else None


def schedule_json(schedule: Schedule) -> dict[str, Any]:
    upcoming = schedules.next_times(schedule.cron, schedule.timezone, clock.now(), NEXT_FIRES) \
        if schedule.enabled else []
    return {"id": schedule.pk, "cron": schedule.cron, "timezone": schedule.timezone, "catch_up": schedule.catch_up,
            "input": schedule.input, "enabled": schedule.enabled, "next_fire_times": [_stamp(t) for t in upcoming],
            "last_fired_at": _stamp(schedule.last_fired_at), "created_at": _stamp(schedule.created_at)}


def webhook_json(hook: Webhook) -> dict[str, Any]:
    path = reverse("webhook-receive", kwargs={"slug": hook.definition.slug, "hook_id": hook.hook_id})
    return {"id": hook.hook_id, "name": hook.name, "enabled": hook.enabled, "input_mapping": hook.input_mapping,
            "url": settings.STEADYFLOW["BASE_URL"].rstrip("/") + path, "created_at": _stamp(hook.created_at),
            "previous_secret_valid_until": _stamp(hook.previous_until)}


def _definition(request: HttpRequest, slug: str, write: bool) -> WorkflowDefinition:
    if write:
        need(request, "design", VIEW, CHANGE)
    else:
        need(request, "read", VIEW)
    return definition_or_404(slug)


def _schedule(definition: WorkflowDefinition, schedule_id: int) -> Schedule:
    found: Schedule | None = definition.schedules.filter(pk=schedule_id).first()
    if found is None:
        raise Problem(404, f"workflow {definition.slug!r} has no schedule {schedule_id}")
    return found


def _webhook(definition: WorkflowDefinition, hook_id: str) -> Webhook:
    found: Webhook | None = definition.webhooks.select_related("definition").filter(hook_id=hook_id).first()
    if found is None:
        raise Problem(404, f"workflow {definition.slug!r} has no webhook {hook_id!r}")
    return found


class ScheduleIn(Schema):
    cron: str = Field(max_length=100, description="Five cron fields: minute hour day month weekday.")
    timezone: str = Field("UTC", max_length=64, description="An IANA time zone the cron expression is read in.")
    catch_up: CatchUp = Field(CatchUp(CatchUp.SKIP), description="What happens to ticks missed while nothing ran.")
    input: dict[str, Any] = Field(default_factory=dict, description="The start input of each run.")
    enabled: bool = True


class EnabledIn(Schema):
    enabled: bool


class WebhookIn(Schema):
    name: str = Field("", max_length=manage.MAX_NAME)
    input_mapping: dict[str, Any] = Field(
        default_factory=dict, description="Start-input field → dotted path in the delivery's JSON body "
                                          "(empty: the whole body is the input).")


@router.get("/workflows/{slug}/schedules", response=dict[str, Any], summary="List a workflow's schedules")
def list_schedules(request: HttpRequest, slug: str) -> dict[str, Any]:
    """Each schedule with its next fire times (UTC; none while disabled)."""
    definition = _definition(request, slug, write=False)
    return {"items": [schedule_json(s) for s in definition.schedules.order_by("pk")]}


@router.post("/workflows/{slug}/schedules", response={201: dict[str, Any]}, summary="Add a schedule")
def create_schedule(request: HttpRequest, slug: str, body: ScheduleIn) -> Status[dict[str, Any]]:
    """Start the workflow's latest version on a cron schedule, from the next future tick."""
    definition = _definition(request, slug, write=True)
    now = clock.now()
    try:
        schedule = schedules.create(definition, body.cron.strip(), body.timezone.strip() or "UTC",
                                    catch_up=body.catch_up, start_input=body.input, now=now)
    except schedules.ScheduleInvalid as exc:
        raise Problem(422, str(exc)) from None
    if not body.enabled:
        schedules.set_enabled(schedule, False, now)
    return Status(201, schedule_json(schedule))


@router.patch("/workflows/{slug}/schedules/{schedule_id}", response=dict[str, Any], summary="Enable or disable a "
              "schedule")
def update_schedule(request: HttpRequest, slug: str, schedule_id: int, body: EnabledIn) -> dict[str, Any]:
    """Enabling starts from the next future tick: ticks passed while disabled are not caught up."""
    schedule = _schedule(_definition(request, slug, write=True), schedule_id)
    schedules.set_enabled(schedule, body.enabled, clock.now())
    return schedule_json(schedule)


@router.delete("/workflows/{slug}/schedules/{schedule_id}", response={204: None}, summary="Delete a schedule")
def delete_schedule(request: HttpRequest, slug: str, schedule_id: int) -> Status[None]:
    _schedule(_definition(request, slug, write=True), schedule_id).delete()
    return Status(204, None)


@router.get("/workflows/{slug}/webhooks", response=dict[str, Any], summary="List a workflow's webhooks")
def list_webhooks(request: HttpRequest, slug: str) -> dict[str, Any]:
    """Each webhook's URL and settings; never a secret."""
    definition = _definition(request, slug, write=False)
    return {"items": [webhook_json(h) for h in definition.webhooks.select_related("definition").order_by("pk")]}


@router.post("/workflows/{slug}/webhooks", response={201: dict[str, Any]}, summary="Add a webhook")
def create_webhook(request: HttpRequest, slug: str, body: WebhookIn) -> Status[dict[str, Any]]:
    """The response holds the signing `secret`: the only time it is shown."""
    definition = _definition(request, slug, write=True)
    try:
        hook = manage.create_webhook(definition, body.name, body.input_mapping, clock.now())
    except mapping.MappingError as exc:
        raise Problem(422, str(exc), [{"field": "body.input_mapping", "message": str(exc)}]) from None
    return Status(201, {**webhook_json(hook), "secret": hook.secret})


@router.post("/workflows/{slug}/webhooks/{hook_id}/rotate", response=dict[str, Any],
             summary="Rotate a webhook's secret")
def rotate_webhook(request: HttpRequest, slug: str, hook_id: str) -> dict[str, Any]:
    """A new `secret` (shown this once); the old one still verifies deliveries for 24 hours."""
    hook = _webhook(_definition(request, slug, write=True), hook_id)
    secret = manage.rotate_secret(hook, clock.now())
    return {**webhook_json(hook), "secret": secret}


@router.patch("/workflows/{slug}/webhooks/{hook_id}", response=dict[str, Any], summary="Enable or disable a webhook")
def update_webhook(request: HttpRequest, slug: str, hook_id: str, body: EnabledIn) -> dict[str, Any]:
    """A disabled webhook refuses deliveries (logged as rejections)."""
    hook = _webhook(_definition(request, slug, write=True), hook_id)
    manage.set_enabled(hook, body.enabled)
    return webhook_json(hook)


@router.delete("/workflows/{slug}/webhooks/{hook_id}", response={204: None}, summary="Delete a webhook")
def delete_webhook(request: HttpRequest, slug: str, hook_id: str) -> Status[None]:
    _webhook(_definition(request, slug, write=True), hook_id).delete()
    return Status(204, None)
