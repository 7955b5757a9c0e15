"""The one form that edits a credential, for the dashboard's page and the admin.

Write-only: the value field never renders what is stored (a password input with no value); left
empty on an existing credential it keeps the stored value.
"""

from __future__ import annotations

from typing import Any

from django import forms

from workflows.credentials import store as credentials
from workflows.credentials.rules import destination_change
from workflows.models import Credential, CredentialKind


class CredentialForm(forms.ModelForm):
    value = forms.CharField(
        required=False, strip=False, max_length=credentials.MAX_VALUE_CHARS,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: never shown again after saving. Leave empty to keep the stored value.")
    base_url = forms.URLField(required=False, max_length=500, assume_scheme="https", label="Base URL",
                              help_text="LLM providers: an OpenAI-compatible endpoint, e.g. "
                                        "https://api.openai.com/v1. Secrets (optional): a URL of the only "
                                        "host the secret may be sent to.")
    allowed_models_text = forms.CharField(
        required=False, label="Allowed models",
        help_text="LLM providers only: model names separated by commas or spaces (empty: any model).")

    class Meta:
        model = Credential
        fields = ("name", "kind", "base_url", "description")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["allowed_models_text"].initial = ", ".join(self.instance.allowed_models or [])
        else:
            self.fields["value"].help_text = "Write-only: never shown again after saving."

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        value = data.get("value") or ""
        if not self.instance.pk and not value:
            self.add_error("value", "a new credential needs a value")
        if self.instance.pk and not value:
            changed = destination_change(self.instance.kind, self.instance.base_url,
                                                     str(data.get("kind") or ""), str(data.get("base_url") or ""))
            if changed:
                self.add_error("value", changed)
        try:
            if value:
                credentials.check_value(value)
            data["allowed_models"] = credentials.clean_fields(
                str(data.get("name") or ""), str(data.get("kind") or ""), str(data.get("base_url") or ""),
                str(data.get("allowed_models_text") or ""))
        except credentials.CredentialError as exc:
            field, _, message = str(exc).partition(": ")
            target = {"models": "allowed_models_text"}.get(field, field)
            self.add_error(target if target in self.fields else None, message or str(exc))
        return data

    def save(self, commit: bool = True) -> Credential:
        credential: Credential = super().save(commit=False)
        credential.allowed_models = (self.cleaned_data.get("allowed_models") or []
                                     if credential.kind == CredentialKind.LLM_PROVIDER else [])
        value = self.cleaned_data.get("value")
        if value:
            credential.set_value(value)
        if commit:
            credential.save()
        return credential
