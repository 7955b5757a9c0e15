"""Login throttling, per account and per address, for every login path (the site, the admin, anything
that calls django.contrib.auth.authenticate).

- Each failed login is a LoginFailure row (the username as typed, case-folded, and the client address).
- An account with MAX_FAILURES_PER_ACCOUNT failures within WINDOW_S, or an address with
  MAX_FAILURES_PER_ADDRESS, is locked: ThrottledModelBackend refuses it *before* checking the password,
  so the right password does not get in either, until enough failures leave the window.
- The lock starting and every refused attempt are written to SecurityEvent (the admin shows them) and
  logged; the login forms say which limit was hit and for how long.
- A successful login clears its account's failures (not its address's).

The address is REMOTE_ADDR: behind a proxy, run daphne with --proxy-headers so it is the client's.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest
from django.utils import timezone

from dashboard.models import LoginFailure, SecurityEvent

log = logging.getLogger("steadyflow.security")

LOCK_ATTRIBUTE = "steadyflow_login_lock"  # set on the request when a login is refused or a lock starts


@dataclass(frozen=True)
class Lock:
    scope: str  # "account" or "address"
    until: datetime

    def message(self, now: datetime | None = None) -> str:
        seconds = max(1.0, (self.until - (now or timezone.now())).total_seconds())
        minutes = math.ceil(seconds / 60)
        who = "this account" if self.scope == "account" else "your address"
        return (f"Too many failed logins for {who}: logins are refused for {minutes} more "
                f"minute{'s' if minutes != 1 else ''}. Try again later or ask an administrator.")


def _config() -> dict[str, int]:
    return settings.LOGIN_THROTTLE


def client_address(request: HttpRequest | None) -> str:
    if request is None:
        return ""
    return str(request.META.get("REMOTE_ADDR") or "")[:64]


def account_key(username: Any) -> str:
    return str(username or "").strip().casefold()[:150]


def current_lock(username: str, address: str, now: datetime | None = None) -> Lock | None:
    """The lock in force for this account or address, if any (the one that lasts longer)."""
    config = _config()
    now = now or timezone.now()
    window = timedelta(seconds=config["WINDOW_S"])
    locks = []
    for scope, field, value, limit in (("account", "username", username, config["MAX_FAILURES_PER_ACCOUNT"]),
                                       ("address", "address", address, config["MAX_FAILURES_PER_ADDRESS"])):
        if not value:
            continue
        recent = list(LoginFailure.objects.filter(**{field: value, "created_at__gt": now - window})
                      .order_by("-created_at").values_list("created_at", flat=True)[:limit])
        if len(recent) >= limit:
            # Sliding window: the lock lifts when the limit-th most recent failure leaves it.
            locks.append(Lock(scope, recent[limit - 1] + window))
    return max(locks, key=lambda lock: lock.until) if locks else None


def audit(action: str, username: str, address: str, **details: Any) -> None:
    SecurityEvent.objects.create(action=action, username=username, address=address, details=details)
    log.warning("security: %s account=%r address=%s %s", action, username, address, details or "")


def record_failure(username: str, address: str, request: HttpRequest | None = None) -> None:
    now = timezone.now()
    LoginFailure.objects.create(username=username, address=address, created_at=now)
    # Keep the table small: failures older than the window count for nothing.
    LoginFailure.objects.filter(created_at__lte=now - timedelta(seconds=_config()["WINDOW_S"])).delete()
    lock = current_lock(username, address, now)
    if lock is not None:
        if request is not None:
            setattr(request, LOCK_ATTRIBUTE, lock)
        audit("login_locked", username, address, scope=lock.scope, until=lock.until.isoformat())


class ThrottledModelBackend(ModelBackend):
    """ModelBackend that refuses a locked account or address without looking at the password."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> Any:
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        account, address = account_key(username), client_address(request)
        lock = current_lock(account, address)
        if lock is not None:
            if request is not None:
                setattr(request, LOCK_ATTRIBUTE, lock)
            audit("login_refused", account, address, scope=lock.scope, until=lock.until.isoformat())
            # authenticate() stops at PermissionDenied: no later backend gets a try.
            raise PermissionDenied(lock.message())
        return super().authenticate(request, username=username, password=password, **kwargs)


def _on_failure(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any) -> None:
    if request is not None and getattr(request, LOCK_ATTRIBUTE, None) is not None:
        return  # refused while locked: already audited, and it must not extend the lock
    username = credentials.get(get_user_model().USERNAME_FIELD, credentials.get("username"))
    record_failure(account_key(username), client_address(request), request)


def _on_success(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    LoginFailure.objects.filter(username=account_key(user.get_username())).delete()


def connect_signals() -> None:
    user_login_failed.connect(_on_failure, dispatch_uid="steadyflow-login-failed")
    user_logged_in.connect(_on_success, dispatch_uid="steadyflow-logged-in")


class _LockMessage:
    """Say why a locked login failed, instead of 'wrong password'."""

    request: HttpRequest | None

    def clean(self) -> dict[str, Any]:
        try:
            return super().clean()  # type: ignore[misc]
        except ValidationError:
            lock = getattr(self.request, LOCK_ATTRIBUTE, None)
            if lock is not None:
                raise ValidationError(lock.message(), code="throttled") from None
            raise


class ThrottledAuthenticationForm(_LockMessage, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(_LockMessage, AdminAuthenticationForm):
    pass
