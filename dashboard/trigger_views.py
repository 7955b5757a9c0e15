"""Triggers on the web: the public, signature-authenticated webhook endpoint, and the workflow's
triggers page (webhooks, schedules, rejected deliveries) where designers manage them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from dashboard import permissions
from dashboard.permissions import authorize
from workflows.engine import strict_json
from workflows.engine.priorities import NORMAL, PRIORITIES, parse_priority
from workflows.models import WorkflowDefinition
from workflows.triggers import manage, mapping, schedules, signing, webhooks
from workflows.triggers.models import CatchUp, Schedule, ScheduleFire, Webhook, WebhookRejection

SECRET_SESSION_KEY = "steadyflow_new_webhook_secret"


@csrf_exempt  # the only CSRF-exempt view: no cookies are used, the HMAC signature authenticates
def webhook_receive(request: HttpRequest, slug: str, hook_id: str) -> JsonResponse:
    if request.method != "POST":
        return JsonResponse({"message": f"method {request.method} not allowed (use POST)"}, status=405)
    limit = settings.STEADYFLOW["WEBHOOK_MAX_BODY_BYTES"]
    too_large = JsonResponse({"message": f"the request body is too large ({limit} bytes at most)"}, status=413)
    try:
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            return too_large
        body = request.body
    except (RequestDataTooBig, ValueError):
        return too_large
    if len(body) > limit:
        return too_large
    headers = {name.lower(): value for name, value in request.headers.items()}
    outcome = webhooks.receive(slug, hook_id, body, headers, timezone.now())
    return JsonResponse(outcome.body, status=outcome.status)


@authorize(permissions.VIEW_GRAPHS)
def workflow_triggers(request: HttpRequest, slug: str) -> HttpResponse:
    definition = get_object_or_404(WorkflowDefinition, slug=slug)
    if request.method == "POST":
        refused = permissions.refusal(request.user, permissions.CHANGE_WORKFLOW)
        if refused is not None:
            raise PermissionDenied(refused)
        try:
            _change(request, definition)
        except (schedules.ScheduleInvalid, mapping.MappingError, strict_json.JSONRejected, ValueError) as exc:
            messages.error(request, str(exc))
        return redirect("workflow-triggers", slug=slug)
    now = timezone.now()
    hooks = list(definition.webhooks.all())
    rows = [{"schedule": s, "next": schedules.next_times(s.cron, s.timezone, now) if s.enabled else []}
            for s in definition.schedules.all()]
    return render(request, "dashboard/triggers.html", {
        "definition": definition, "webhooks": hooks, "schedules": rows,
        "rejections": WebhookRejection.objects.filter(webhook__definition=definition).select_related("webhook")[:50],
        "fires": ScheduleFire.objects.filter(schedule__definition=definition)[:20],
        "new_secret": request.session.pop(SECRET_SESSION_KEY, None),
        "can_change": request.user.has_perm(permissions.CHANGE_WORKFLOW),
        "catch_up_choices": CatchUp.values, "priorities": PRIORITIES, "signature_header": signing.HEADER,
        "delivery_header": signing.DELIVERY_HEADER,
        "base_url": settings.STEADYFLOW["BASE_URL"].rstrip("/"),
    })


def _json_field(request: HttpRequest, name: str) -> Any:
    text = request.POST.get(name, "").strip()
    return strict_json.loads(text, name) if text else {}


def _change(request: HttpRequest, definition: WorkflowDefinition) -> None:
    action = request.POST.get("action", "")
    now = timezone.now()
    pk = request.POST.get("id", "")
    if action == "add_webhook":
        priority = parse_priority(request.POST.get("priority") or None, "the webhook's priority")
        hook = manage.create_webhook(definition, request.POST.get("name", ""), _json_field(request, "input_mapping"),
                                     now, priority=priority)
        # Shown once, on the next page view (kept server-side in the session, not in a cookie).
        request.session[SECRET_SESSION_KEY] = {"hook": hook.hook_id, "secret": hook.secret}
        messages.success(request, f"webhook {hook.hook_id} created: copy its secret now, it is not shown again")
    elif action in ("enable_webhook", "disable_webhook", "rotate_webhook", "delete_webhook"):
        hook = get_object_or_404(Webhook, definition=definition, pk=pk)
        if action == "delete_webhook":
            hook.delete()
        elif action == "rotate_webhook":
            request.session[SECRET_SESSION_KEY] = {"hook": hook.hook_id, "secret": manage.rotate_secret(hook, now)}
            messages.success(request, f"webhook {hook.hook_id}: new secret (the old one works for 24 hours)")
        else:
            manage.set_enabled(hook, action == "enable_webhook")
    elif action == "add_schedule":
        schedules.create(definition, request.POST.get("cron", "").strip(),
                         request.POST.get("timezone", "UTC").strip() or "UTC",
                         catch_up=request.POST.get("catch_up", CatchUp.SKIP), start_input=_json_field(request, "input"),
                         now=now, priority=request.POST.get("priority") or NORMAL)
        messages.success(request, "schedule added")
    elif action in ("enable_schedule", "disable_schedule", "delete_schedule"):
        schedule = get_object_or_404(Schedule, definition=definition, pk=pk)
        if action == "delete_schedule":
            schedule.delete()
        else:
            schedules.set_enabled(schedule, action == "enable_schedule", now)
    else:
        raise ValueError(f"unknown action {action!r}")
