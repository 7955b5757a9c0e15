"""The triggers page's two forms (add a webhook, add a schedule): rendered field by field with labels,
help text and errors like the app's other forms, and checked here so a mistake is shown at its field
with what was typed kept, rather than as a message above an emptied form."""

from __future__ import annotations

from typing import Any

from django import forms

from workflows.engine import strict_json
from workflows.engine.priorities import NORMAL, PRIORITIES
from workflows.triggers import mapping, schedules
from workflows.triggers.models import CatchUp

PRIORITY_CHOICES = [(p, p) for p in PRIORITIES]


def _json_value(text: str, what: str) -> Any:
    """The field's JSON value ({} when empty); a ValidationError naming what is wrong."""
    if not text.strip():
        return {}
    try:
        return strict_json.loads(text, what)
    except strict_json.JSONRejected as exc:
        raise forms.ValidationError(str(exc)) from None


class WebhookForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, help_text="Only for you: which sender this is.")
    input_mapping = forms.CharField(
        required=False, label="Input mapping", widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        help_text='JSON: {"input field": "/json/pointer" or "dotted.path"}. Empty: the whole payload is the input.')
    priority = forms.ChoiceField(choices=PRIORITY_CHOICES, initial=NORMAL, required=False,
                                 help_text="Of the instances it starts: high work is taken first.")

    def clean_priority(self) -> str:
        return self.cleaned_data["priority"] or NORMAL  # absent (an API-like post): the default

    def clean_input_mapping(self) -> dict[str, str]:
        value = _json_value(self.cleaned_data["input_mapping"], "the input mapping")
        try:
            return mapping.check_mapping(value)
        except mapping.MappingError as exc:
            raise forms.ValidationError(str(exc)) from None


class ScheduleForm(forms.Form):
    cron = forms.CharField(label="Cron", max_length=200, widget=forms.TextInput(attrs={"placeholder": "*/15 * * * *"}),
                           help_text="Five fields: minute hour day month weekday.")
    timezone = forms.CharField(label="Time zone", max_length=64, initial="UTC", required=False,
                               help_text="An IANA name such as Europe/Berlin.")
    catch_up = forms.ChoiceField(label="Catch-up", choices=[(c, c) for c in CatchUp.values], initial=CatchUp.SKIP,
                                 required=False,
                                 help_text="Ticks missed while no scheduler ran: skip them, or run the most recent "
                                           "once.")
    input = forms.CharField(required=False, label="Input", widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
                            help_text="The start input, a JSON object (empty: the workflow's declared defaults).")
    priority = forms.ChoiceField(choices=PRIORITY_CHOICES, initial=NORMAL, required=False)

    def clean_priority(self) -> str:
        return self.cleaned_data["priority"] or NORMAL

    def clean_catch_up(self) -> str:
        return self.cleaned_data["catch_up"] or CatchUp.SKIP

    def clean_input(self) -> dict[str, Any]:
        value = _json_value(self.cleaned_data["input"], "the schedule's input")
        if not isinstance(value, dict):
            raise forms.ValidationError("the schedule's input must be a JSON object")
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        cron, zone = str(data.get("cron") or "").strip(), str(data.get("timezone") or "").strip() or "UTC"
        data["cron"], data["timezone"] = cron, zone
        if cron:
            try:
                schedules.check(cron, zone)
            except schedules.ScheduleInvalid as exc:
                # check() names the cron expression or the time zone; the error goes to that field.
                self.add_error("timezone" if "time zone" in str(exc) else "cron", str(exc))
        return data
