"""Credentials: named secrets, LLM providers and MCP servers, encrypted at rest. Rows of the `workflows` app
(workflows.models imports them), here with the code that encrypts and checks them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class CredentialKind(models.TextChoices):
    SECRET = "secret", "Secret (referenced as {{ secrets.NAME }})"
    LLM_PROVIDER = "llm_provider", "LLM provider (base URL, key, models)"
    MCP_SERVER = "mcp_server", "MCP server (URL, bearer token)"


class Credential(models.Model):
    """A named credential, its value encrypted at rest (workflows/credentials/store.py: Fernet with
    STEADYFLOW_CREDENTIALS_KEY). Write-only: nothing ever shows a value after it is saved."""

    name = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=CredentialKind.choices, default=CredentialKind.SECRET)
    encrypted_value = models.TextField(editable=False)
    # LLM providers: their API's base URL and the models nodes may ask for (empty: any). MCP servers:
    # their streamable-HTTP endpoint.
    base_url = models.URLField(max_length=500, blank=True)
    allowed_models = models.JSONField(default=list, blank=True)
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any) -> Credential:
        loaded = super().from_db(db, field_names, values)
        # Where it was sent, and its value, as loaded: save() refuses a new destination with the old value.
        loaded._loaded_destination = (loaded.__dict__.get("kind"), loaded.__dict__.get("base_url"),
                                      loaded.__dict__.get("encrypted_value"))
        return loaded

    def save(self, *args: Any, **kwargs: Any) -> None:
        loaded = getattr(self, "_loaded_destination", None)
        if self.pk and loaded is not None and loaded[2] == self.encrypted_value:
            from workflows.credentials.rules import CredentialError, destination_change

            changed = destination_change(str(loaded[0]), str(loaded[1] or ""), str(self.kind), str(self.base_url))
            if changed:
                raise CredentialError(f"value: {changed}")
        super().save(*args, **kwargs)
        self._loaded_destination = (self.kind, self.base_url, self.encrypted_value)

    def set_value(self, value: str) -> None:
        from workflows.credentials.crypto import encrypt

        self.encrypted_value = encrypt(value)
        self.updated_at = timezone.now()
