"""Triggers on the web: the public, signature-authenticated webhook endpoint, and the workflow's
triggers page (webhooks, schedules, rejected deliveries) where designers manage them."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from dashboard.pages.public_url import public_base
from dashboard.pages.trigger_forms import ScheduleForm, WebhookForm
from dashboard.security import permissions
from dashboard.security.login_throttle import client_address
from dashboard.security.permissions import authorize
from workflows.engine.priorities import parse_priority
from workflows.models import WorkflowDefinition
from workflows.triggers import manage, mapping, schedules, signing, throttle, webhooks
from workflows.triggers.models import Schedule, ScheduleFire, Webhook, WebhookRejection

log = logging.getLogger("steadyflow.triggers")


@csrf_exempt  # the only CSRF-exempt view: no cookies are used, the HMAC signature authenticates
def webhook_receive(request: HttpRequest, slug: str, hook_id: str) -> JsonResponse:
    """A delivery. An address or hook over its limit of rejected requests (workflows/triggers/throttle.py)
    is answered 429 before anything else: no body read, no lookup, no HMAC."""
    address, now = client_address(request), timezone.now()
    refused = throttle.refusal(address, hook_id, now.timestamp())
    if refused is not None:
        wait, message = refused
        response = JsonResponse({"message": message}, status=429)
        response["Retry-After"] = str(wait)
        return response
    outcome = _receive(request, slug, hook_id, now)
    if not outcome.signed:
        # 404 is no hook's: counted for the address only, so nobody can lock a hook by guessing wrong.
        throttle.count(address, hook_id if outcome.status != 404 else None, now.timestamp())
    elif 200 <= outcome.status < 300:
        throttle.remember_sender(address, hook_id)
    return JsonResponse(outcome.body, status=outcome.status)


def _receive(request: HttpRequest, slug: str, hook_id: str, now: datetime) -> webhooks.Outcome:
    if request.method != "POST":
        return _refused(405, f"method {request.method} not allowed (use POST)", hook_id, request)
    limit = settings.STEADYFLOW["WEBHOOK_MAX_BODY_BYTES"]
    too_large = f"the request body is too large ({limit} bytes at most)"
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            return _refused(413, too_large, hook_id, request)
        body = request.body
    except (RequestDataTooBig, ValueError):
        return _refused(413, too_large, hook_id, request)
    if len(body) > limit:
        return _refused(413, too_large, hook_id, request)
    headers = {name.lower(): value for name, value in request.headers.items()}
    outcome = webhooks.receive(slug, hook_id, body, headers, now)
    if outcome.status == 404:
        log.info("webhook request refused", extra={"hook": hook_id[:64], "status": 404,
                                                   "client": client_address(request)})
    return outcome


def _refused(status: int, message: str, hook_id: str, request: HttpRequest) -> webhooks.Outcome:
    """A request refused before the hook is looked up (no WebhookRejection row: that is per hook)."""
    log.info("webhook request refused", extra={"hook": hook_id[:64], "status": status,
                                               "client": client_address(request)})
    return webhooks.Outcome(status, {"message": message}, signed=False)


@authorize(permissions.VIEW_GRAPHS)
def workflow_triggers(request: HttpRequest, slug: str) -> HttpResponse:
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    if request.method == "POST":
        refused = permissions.refusal(request.user, permissions.CHANGE_WORKFLOW)
        if refused is not None:
            raise PermissionDenied(refused)
        action = request.POST.get("action", "")
        if action in ("add_webhook", "add_schedule"):
            return _add(request, definition, action)
        try:
            new_secret = _change(request, definition, action)
        except ValueError as exc:
            messages.error(request, str(exc))
        else:
            if new_secret is not None:
                # Shown in this answer only (no-store), never kept in the session.
                return _page(request, definition, new_secret)
        return redirect("workflow-triggers", slug=slug)
    return _page(request, definition, None)


def _forms(data: Any = None, action: str = "") -> tuple[WebhookForm, ScheduleForm]:
    """The two add forms; the one posted is bound. Their own id prefixes: both have a priority field."""
    return (WebhookForm(data if action == "add_webhook" else None, auto_id="webhook_%s"),
            ScheduleForm(data if action == "add_schedule" else None, auto_id="schedule_%s"))


def _add(request: HttpRequest, definition: WorkflowDefinition, action: str) -> HttpResponse:
    """A new webhook (its secret shown once in this answer) or schedule; a mistake is shown at its field
    with what was typed kept (400)."""
    webhook_form, schedule_form = _forms(request.POST, action)
    form: forms.Form = webhook_form if action == "add_webhook" else schedule_form
    if form.is_valid():
        data, now = form.cleaned_data, timezone.now()
        try:
            if action == "add_webhook":
                hook = manage.create_webhook(definition, data["name"], data["input_mapping"], now,
                                             priority=parse_priority(data["priority"], "the webhook's priority"))
                messages.success(request, f"webhook {hook.hook_id} created: copy its secret now, it is not shown again")
                return _page(request, definition, {"hook": hook.hook_id, "secret": hook.secret})
            schedules.create(definition, data["cron"], data["timezone"], catch_up=data["catch_up"],
                             start_input=data["input"], now=now, priority=data["priority"])
        except (schedules.ScheduleInvalid, mapping.MappingError, ValueError) as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "schedule added")
            return redirect("workflow-triggers", slug=definition.slug)
    return _page(request, definition, None, (webhook_form, schedule_form), status=400)


def _page(request: HttpRequest, definition: WorkflowDefinition, new_secret: dict[str, str] | None,
          add_forms: tuple[WebhookForm, ScheduleForm] | None = None, status: int = 200) -> HttpResponse:
    now = timezone.now()
    hooks = list(definition.webhooks.all())
    rows = [{"schedule": s, "next": schedules.next_times(s.cron, s.timezone, now) if s.enabled else []}
            for s in definition.schedules.all()]
    webhook_form, schedule_form = add_forms or _forms()
    response = render(request, "dashboard/triggers.html", {
        "definition": definition, "webhooks": hooks, "schedules": rows,
        "rejections": WebhookRejection.objects.filter(webhook__definition=definition).select_related("webhook")[:50],
        "fires": ScheduleFire.objects.filter(schedule__definition=definition)[:20],
        "new_secret": new_secret,
        "can_change": request.user.has_perm(permissions.CHANGE_WORKFLOW),
        "webhook_form": webhook_form, "schedule_form": schedule_form,
        "signature_header": signing.HEADER, "delivery_header": signing.DELIVERY_HEADER,
        # The webhook URLs to paste elsewhere: the public address, not BASE_URL's notification default.
        "base_url": public_base(request),
    }, status=status)
    response["Cache-Control"] = "no-store"  # it may show a new secret: no cache may keep it
    return response


def _change(request: HttpRequest, definition: WorkflowDefinition, action: str) -> dict[str, str] | None:
    """Apply a POSTed action on an existing webhook or schedule; a new webhook secret to show once, or None."""
    now = timezone.now()
    pk = request.POST.get("id", "")
    if action in ("enable_webhook", "disable_webhook", "rotate_webhook", "delete_webhook"):
        hook = get_object_or_404(Webhook, definition=definition, pk=pk)
        if action == "delete_webhook":
            hook.delete()
        elif action == "rotate_webhook":
            messages.success(request, f"webhook {hook.hook_id}: new secret (the old one works for 24 hours)")
            return {"hook": hook.hook_id, "secret": manage.rotate_secret(hook, now)}
        else:
            manage.set_enabled(hook, action == "enable_webhook")
    elif action in ("enable_schedule", "disable_schedule", "delete_schedule"):
        schedule = get_object_or_404(Schedule, definition=definition, pk=pk)
        if action == "delete_schedule":
            schedule.delete()
        else:
            schedules.set_enabled(schedule, action == "enable_schedule", now)
    else:
        raise ValueError(f"unknown action {action!r}")
    return None
