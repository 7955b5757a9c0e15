"""The site's own tables: failed logins (for throttling) and the security audit trail."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class LoginFailure(models.Model):
    """One failed login. dashboard/security/login_throttle.py counts them per account and per address over a
    window; rows older than the window are deleted as new failures come in."""

    username = models.CharField(max_length=150)  # as typed, case-folded: the account need not exist
    address = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["username", "created_at"], name="loginfailure_user_at"),
            models.Index(fields=["address", "created_at"], name="loginfailure_address_at"),
            models.Index(fields=["created_at"], name="loginfailure_at"),
        ]

    def __str__(self) -> str:
        return f"{self.username} from {self.address} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class SecurityEvent(models.Model):
    """Append-only audit of security events that belong to no workflow instance: a login lockout
    starting, a login refused while locked."""

    action = models.CharField(max_length=40)
    username = models.CharField(max_length=150, blank=True)
    address = models.CharField(max_length=64, blank=True)
    details = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.action} {self.username} from {self.address}"


class ApiToken(models.Model):
    """A user's token for the v1 API (dashboard/security/tokens.py). Only the sha256 of the secret part is kept:
    the whole token is shown once, when made. `key` (public, in the token) finds the row; the digest is
    then compared in constant time."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    key = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.user_id}, sf_{self.key}…)"
