"""The review decision form, shared by the Django admin and the operators' dashboard page."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from workflows.engine import limits, strict_json
from workflows.engine.schema_checks import schema_problem
from workflows.models import ReviewItem
from workflows.operators import review

ACTION_LABELS = {
    "approve": "Approve and continue",
    "retry": "Retry the parked step",
    "edit_context": "Edit context and continue",
    "reroute": "Continue from a chosen node",
    "reject": "Reject (fail and compensate)",
    "cancel": "Cancel the instance",
}
HUMAN_ACTIONS = {"approve": "Approve", "reject": "Reject", "cancel": "Cancel the instance"}


class JSONTextField(forms.CharField):
    """A declared input whose schema is not a simple scalar: typed as JSON."""


def _field_for(name: str, schema: Any) -> forms.Field:
    problem = schema_problem(schema)
    if problem:
        # Stored before schemas were checked at save: shown as a plain JSON field saying why (the
        # approval is refused with the same message; the task can still be rejected).
        return JSONTextField(label=f"{name} (JSON)", help_text=f"This input's declared schema {problem}.",
                             required=False, widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}))
    label = str(schema.get("title") or name)
    help_text = str(schema.get("description", ""))
    kind = schema.get("type")
    if "enum" in schema:
        return forms.ChoiceField(choices=[(v, v) for v in schema["enum"]], label=label, help_text=help_text,
                                 required=False)
    if kind == "boolean":
        return forms.BooleanField(label=label, help_text=help_text, required=False)
    if kind == "integer":
        return forms.IntegerField(label=label, help_text=help_text, required=False)
    if kind == "number":
        return forms.FloatField(label=label, help_text=help_text, required=False)
    if kind == "string":
        return forms.CharField(label=label, help_text=help_text, required=False)
    return JSONTextField(label=f"{label} (JSON)", help_text=help_text, required=False,
                         widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}))


class ReviewDecisionForm(forms.Form):
    action = forms.ChoiceField(choices=())
    extra_transitions = forms.IntegerField(required=False, min_value=0, max_value=limits.MAX_GRANT_TRANSITIONS,
                                           label="Grant more transitions")
    extra_budget_usd = forms.DecimalField(required=False, min_value=0, max_value=limits.MAX_GRANT_BUDGET_USD,
                                          decimal_places=6, max_digits=14, label="Grant more budget (USD)")
    extra_tokens = forms.IntegerField(required=False, min_value=0, max_value=limits.MAX_GRANT_TOKENS,
                                      label="Grant more tokens")
    extra_ttl_s = forms.FloatField(required=False, min_value=1, max_value=limits.MAX_GRANT_TTL_S,
                                   label="Grant more time (seconds)")
    context = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 8, "class": "mono"}),
                              label="Context (JSON)")
    goto = forms.ChoiceField(required=False, choices=(), label="Next node")
    inputs = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}),
                             label="Answer (JSON object of the declared inputs)")
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args: Any, item: ReviewItem, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.item = item
        instance = item.instance
        human = item.reason == "human_task"
        labels = HUMAN_ACTIONS if human else ACTION_LABELS
        self.fields["action"].choices = list(labels.items())
        nodes = [n["id"] for n in instance.version.graph.get("nodes", []) if n.get("type") != "start"]
        self.fields["goto"].choices = [("", "—")] + [(n, n) for n in nodes]
        self.initial.setdefault("context", json.dumps(instance.context, indent=2, sort_keys=True))
        if human:
            for name in ("extra_transitions", "extra_budget_usd", "extra_tokens", "extra_ttl_s", "context", "goto"):
                del self.fields[name]
            del self.fields["inputs"]
            # One field per declared input, from its JSON Schema; the engine validates again on decide.
            for name, schema in (item.details.get("inputs") or {}).items():
                self.fields[f"input_{name}"] = _field_for(name, schema)
        else:
            del self.fields["inputs"]

    def _json(self, name: str) -> Any:
        raw = (self.cleaned_data.get(name) or "").strip()
        if not raw:
            return None
        try:
            return strict_json.loads(raw, what="this")
        except strict_json.JSONRejected as exc:
            raise forms.ValidationError({name: str(exc)}) from None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if "context" in self.fields:
            context = self._json("context")
            if context is not None and not isinstance(context, dict):
                self.add_error("context", "the context must be a JSON object")
            data["context_value"] = context
        inputs: dict[str, Any] = {}
        for name in list(self.fields):
            if not name.startswith("input_") or name not in data:
                continue
            value = data[name]
            if isinstance(self.fields[name], JSONTextField) and isinstance(value, str) and value.strip():
                try:
                    value = strict_json.loads(value, what="this")
                except strict_json.JSONRejected as exc:
                    self.add_error(name, str(exc))
                    continue
            if value not in (None, ""):
                inputs[name[len("input_"):]] = value
        data["inputs_value"] = inputs
        if data.get("action") == "reroute" and not data.get("goto"):
            self.add_error("goto", "choose the node to continue from")
        return data

    def decision(self) -> review.Decision:
        data = self.cleaned_data
        context = data.get("context_value")
        # The context is sent along only when edited: an untouched form must not rewrite it.
        if context == self.item.instance.context and data["action"] != "edit_context":
            context = None
        if data["action"] == "edit_context" and context is None:
            context = {}
        return review.Decision(
            action=data["action"],
            extra_transitions=data.get("extra_transitions"),
            extra_budget_usd=data.get("extra_budget_usd"),
            extra_tokens=data.get("extra_tokens"),
            extra_ttl_s=data.get("extra_ttl_s"),
            context=context,
            goto=data.get("goto") or None,
            inputs=data.get("inputs_value") or {},
            note=data.get("note", ""),
        )
