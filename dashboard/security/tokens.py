"""API tokens: made, checked, rate-limited and revoked.

A token reads `sf_<key>_<secret>`: `key` (12 hex characters, public) finds the row, `secret` (32 random
bytes, URL-safe base64) is the credential. Only sha256(secret) is stored, and it is compared with
hmac.compare_digest, so neither the database nor the timing of a refusal gives the secret away. The
secret is high-entropy, so a plain (unsalted, fast) hash is enough: there is nothing to brute-force.

Scopes say what a token is for; each maps onto role permissions (dashboard/security/permissions.py). A request
needs the scope in the token AND the permissions in its user: a token never does more than its user.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from dashboard.models import ApiToken
from dashboard.security import permissions
from workflows.adapters import ratelimit

log = logging.getLogger("steadyflow.api")

PREFIX = "sf_"
KEY_HEX = 12
# What each scope lets a token do, as the permissions an endpoint in that scope may check.
SCOPES: dict[str, tuple[str, ...]] = {
    "read": (permissions.VIEW_GRAPHS, permissions.VIEW_INSTANCES, permissions.VIEW_REVIEWS),
    "run": (permissions.START,),
    "operate": (permissions.OPERATE, permissions.DECIDE, permissions.RESET_BREAKER),
    "design": (permissions.SAVE_VERSION, permissions.CHANGE_WORKFLOW),
}
LAST_USED_EVERY_S = 60  # last_used_at is written at most once a minute per token


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def scopes_for(user: Any) -> list[str]:
    """The scopes a user may give a token: those with at least one permission the user holds."""
    return [scope for scope, perms in SCOPES.items() if any(user.has_perm(perm) for perm in perms)]


@dataclass(frozen=True)
class Issued:
    token: ApiToken
    plaintext: str  # shown once, never stored


def issue(user: Any, name: str, scopes: list[str], expires_at: datetime | None = None) -> Issued:
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(unknown)} (one of {', '.join(SCOPES)})")
    beyond = sorted(set(scopes) - set(scopes_for(user)))
    if beyond:
        raise ValueError(f"you hold no permission of the scope(s) {', '.join(beyond)}")
    if not scopes:
        raise ValueError("choose at least one scope")
    key = secrets.token_hex(KEY_HEX // 2)
    secret = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, key=key, digest=digest(secret),
                                    scopes=sorted(scopes, key=list(SCOPES).index), expires_at=expires_at)
    return Issued(token, f"{PREFIX}{key}_{secret}")


class TokenRefused(Exception):
    """Why a presented token does not authenticate (unknown, malformed, expired or revoked)."""


def public_key(presented: str) -> str:
    """The public part of a presented token (what finds its row), for a log line: never its secret."""
    if not presented.startswith(PREFIX):
        return "(not a Steadyflow token)"
    key = presented[len(PREFIX):].partition("_")[0]
    return key[:16] if key.isalnum() else "(malformed)"


def authenticate(presented: str, now: datetime | None = None) -> ApiToken:
    """The live token `presented` stands for; raises TokenRefused. Marks it used (at most once a minute)."""
    now = now or timezone.now()
    if not presented.startswith(PREFIX) or presented.count("_") < 2:
        raise TokenRefused("not a Steadyflow API token (they start with sf_)")
    key, _, secret = presented[len(PREFIX):].partition("_")
    token: ApiToken | None = ApiToken.objects.select_related("user").filter(key=key).first()
    # Compare even when there is no row, so an unknown key takes as long as a wrong secret.
    expected = token.digest if token is not None else digest("")
    if not hmac.compare_digest(expected, digest(secret)) or token is None:
        raise TokenRefused("invalid token")
    if token.revoked_at is not None:
        raise TokenRefused("this token was revoked")
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRefused("this token has expired")
    if not token.user.is_active:
        raise TokenRefused("the token's user is inactive")
    if token.last_used_at is None or token.last_used_at <= now - timedelta(seconds=LAST_USED_EVERY_S):
        # A conditional UPDATE: of many requests at once, one writes; no read-modify-write.
        ApiToken.objects.filter(pk=token.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - timedelta(seconds=LAST_USED_EVERY_S))
        ).update(last_used_at=now)
        token.last_used_at = now
    return token


def revoke(token: ApiToken, now: datetime | None = None) -> None:
    if token.revoked_at is None:
        token.revoked_at = now or timezone.now()
        token.save(update_fields=["revoked_at"])


def scope_refusal(token: ApiToken | None, user: Any, scope: str, *perms: str) -> str | None:
    """Why this request may not do what needs `scope` and `perms`, None when it may. `token` is None
    for a session: the user's permissions alone decide. The user's refusal comes first: a scope could not
    help a user without the permission."""
    refused = permissions.refusal(user, *perms)
    if refused is None and token is not None and scope not in token.scopes:
        refused = f"this token lacks the '{scope}' scope (it has: {', '.join(token.scopes) or 'none'})"
    return refused


# --- Rate limit -------------------------------------------------------------------------------------

def rate_limit() -> tuple[int, int]:
    """(requests, window in seconds) per user, across all of the user's tokens and sessions:
    STEADYFLOW_API_RATE_LIMIT per STEADYFLOW_API_RATE_WINDOW_S."""
    conf = settings.STEADYFLOW
    return int(conf["API_RATE_LIMIT"]), int(conf["API_RATE_WINDOW_S"])


def retry_after(user_id: int, now: float | None = None) -> int | None:
    """Count one API request of the user `user_id` (whichever token or session it came with) in the
    current fixed window (workflows/adapters/ratelimit.py): more tokens or the session cookie buy no more calls.
    Returns None when allowed, else the seconds until the window ends (Retry-After). With Redis
    unreachable the request is allowed: the limit protects capacity, it is not a permission."""
    limit, window_s = rate_limit()
    window = ratelimit.Window("api-rate-user", limit, window_s)
    now = time.time() if now is None else now
    count = ratelimit.hit(window, str(user_id), now)
    if count is None or count <= limit:
        return None
    return window.retry_after(now)


def rate_message(wait: int) -> str:
    limit, window = rate_limit()
    return (f"rate limit of {limit} requests per {window} s for your account (all its tokens and sessions) "
            f"reached: retry in {wait} s")
