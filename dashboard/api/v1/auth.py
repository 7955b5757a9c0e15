"""Who is calling the v1 API, and may they do this?

Two ways in: an API token (`Authorization: Bearer sf_…`, dashboard/security/tokens.py) or the dashboard's
session cookie, both rate-limited per user (all of a user's tokens and sessions share one budget),
the session with Django's CSRF check on unsafe methods (django-ninja's SessionAuth). A present but
bad token is refused outright (401), not retried as a session.

Each endpoint then calls `need(request, scope, *perms)`: the token's scope (for a token) and the user's
role permissions (always), so a token never does more than its user.
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpRequest
from ninja.security import HttpBearer, SessionAuth

from dashboard.api.v1.problems import Problem
from dashboard.models import ApiToken
from dashboard.security import tokens

log = logging.getLogger("steadyflow.api")


def limited(user_id: int) -> None:
    """Count one call of this user; a 429 problem with Retry-After past the per-user limit."""
    wait = tokens.retry_after(user_id)
    if wait is not None:
        raise Problem(429, tokens.rate_message(wait), headers={"Retry-After": str(wait)})


class TokenAuth(HttpBearer):
    openapi_description = "An API token made on the API tokens page (sf_…), sent as `Authorization: Bearer`."

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        return authenticate_token(request, token)


def authenticate_token(request: HttpRequest, token: str) -> Any:
    """Make the token's user the request's (a 401 problem for a bad token, 429 over the rate limit).
    Also what the event stream (dashboard/api/v1/stream.py, outside ninja) calls."""
    try:
        found = tokens.authenticate(token)
    except tokens.TokenRefused as exc:
        # Logged (a guessing client shows up), naming the token's public key part, never its secret.
        log.warning("API token refused: %s (key %s, from %s)", exc, tokens.public_key(token),
                    request.META.get("REMOTE_ADDR", ""))
        raise Problem(401, f"authentication failed: {exc}") from None
    limited(found.user.pk)
    request.user = found.user
    request.api_token = found
    return found.user


class SessionWithCsrf(SessionAuth):
    """The dashboard's login session; ninja checks CSRF for unsafe methods when `csrf` is on."""

    openapi_description = "The dashboard's session cookie (unsafe methods also need the X-CSRFToken header)."

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = super().authenticate(request, key)
        if user:
            limited(user.pk)  # the same budget as the user's tokens
            request.api_token = None
        return user


AUTH = [TokenAuth(), SessionWithCsrf(csrf=True)]


def token_of(request: HttpRequest) -> ApiToken | None:
    return getattr(request, "api_token", None)


def need(request: HttpRequest, scope: str, *perms: str) -> None:
    """Raise a 403 problem unless the request may do what needs `scope` and `perms`."""
    message = tokens.scope_refusal(token_of(request), request.user, scope, *perms)
    if message is not None:
        raise Problem(403, message)


def has_scope(request: HttpRequest, scope: str) -> bool:
    token = token_of(request)
    return token is None or scope in token.scopes
