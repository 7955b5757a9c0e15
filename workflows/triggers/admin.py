"""The admin for triggers and notifications. Secrets never appear: a webhook's is shown once on the
workflow's triggers page (where webhooks are created), a channel's is write-only here."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.http import HttpRequest
from django.utils.html import format_html_join

from workflows import clock
from workflows.triggers import mapping, schedules
from workflows.triggers.models import (
    ChannelKind,
    DeliveryAttempt,
    NotificationChannel,
    NotificationDelivery,
    Schedule,
    ScheduleFire,
    Webhook,
    WebhookRejection,
)


class RejectionInline(admin.TabularInline):
    model = WebhookRejection
    fields = ("created_at", "status", "reason", "delivery_id")
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0


class WebhookForm(forms.ModelForm):
    class Meta:
        model = Webhook
        fields = ("name", "enabled", "input_mapping", "priority")

    def clean_input_mapping(self) -> dict[str, str]:
        try:
            return mapping.check_mapping(self.cleaned_data.get("input_mapping"))
        except mapping.MappingError as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ("hook_id", "definition", "name", "enabled", "created_at")
    list_filter = ("enabled",)
    fields = ("definition", "hook_id", "name", "enabled", "input_mapping", "priority", "created_at")
    readonly_fields = ("definition", "hook_id", "created_at")
    inlines = [RejectionInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # created on the workflow's triggers page, which shows the secret once


@admin.register(WebhookRejection)
class WebhookRejectionAdmin(admin.ModelAdmin):
    list_display = ("created_at", "webhook", "status", "reason", "delivery_id")
    list_filter = ("status",)
    readonly_fields = ("webhook", "created_at", "status", "reason", "delivery_id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = ("definition", "cron", "timezone", "catch_up", "input", "priority", "enabled")

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        try:
            schedules.check(data.get("cron", ""), data.get("timezone", ""))
        except schedules.ScheduleInvalid as exc:
            raise forms.ValidationError(str(exc)) from None
        if not isinstance(data.get("input", {}), dict):
            raise forms.ValidationError("the input must be a JSON object")
        return data


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = ("definition", "cron", "timezone", "catch_up", "enabled", "next_fire_at", "last_fired_at")
    list_filter = ("enabled", "catch_up")
    readonly_fields = ("next_fire_times", "last_fired_at")

    @admin.display(description="next 5 fire times (UTC)")
    def next_fire_times(self, obj: Schedule) -> str:
        if not obj.pk or not obj.enabled:
            return "—"
        times = schedules.next_times(obj.cron, obj.timezone, clock.now())
        return str(format_html_join(", ", "{}", ((t.strftime("%Y-%m-%d %H:%M"),) for t in times)))

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        # From the next future tick after any change (nothing is caught up for an edit).
        obj.next_fire_at = schedules.next_times(obj.cron, obj.timezone, clock.now(), 1)[0]
        super().save_model(request, obj, form, change)


@admin.register(ScheduleFire)
class ScheduleFireAdmin(admin.ModelAdmin):
    list_display = ("schedule", "fire_at", "instance", "missed", "created_at")
    readonly_fields = ("schedule", "fire_at", "instance", "missed", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class ChannelForm(forms.ModelForm):
    secret = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                             help_text="webhook channels: the signing secret (leave empty to keep the current one)")

    class Meta:
        model = NotificationChannel
        fields = ("name", "kind", "target", "events", "enabled", "secret", "approver_group")

    def clean_secret(self) -> str:
        value: str = self.cleaned_data.get("secret") or ""
        return value or (self.instance.secret if self.instance.pk else "") or NotificationChannel().secret

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        target = str(data.get("target", ""))
        if data.get("kind") in (ChannelKind.WEBHOOK, ChannelKind.SLACK) and not target.startswith(("http://", "https://")):
            raise forms.ValidationError("a webhook or Slack channel's target is an http(s) URL")
        if data.get("approver_group") and data.get("kind") != ChannelKind.EMAIL:
            raise forms.ValidationError("only an email channel's recipients can be approvers")
        if data.get("kind") == ChannelKind.EMAIL:
            for address in (a.strip() for a in target.split(",")):
                try:
                    validate_email(address)
                except ValidationError:
                    raise forms.ValidationError(f"{address!r} is not an email address") from None
        return data

    def clean_events(self) -> list[str]:
        from workflows.triggers.models import NOTIFY_EVENTS

        events = self.cleaned_data.get("events")
        if not isinstance(events, list) or not set(events) <= set(NOTIFY_EVENTS):
            raise forms.ValidationError(f"a list of events among {', '.join(NOTIFY_EVENTS)}")
        return events


@admin.register(NotificationChannel)
class NotificationChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = ("name", "kind", "target", "events", "enabled")
    list_filter = ("kind", "enabled")


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    fields = ("number", "created_at", "ok", "status_code", "error", "next_attempt_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "channel", "event", "instance", "status", "attempts", "next_attempt_at")
    list_filter = ("status", "event")
    readonly_fields = ("channel", "event", "instance", "review", "payload", "status", "attempts",
                       "next_attempt_at", "created_at")
    inlines = [AttemptInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
