"""API tokens: made on the page and shown once, stored hashed, refused when expired or revoked, marking
their last use at most once a minute, bounded by their scopes and by their user's permissions, and
rate-limited with a 429 and Retry-After."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone

from dashboard.models import ApiToken
from dashboard.security import tokens
from tests.api.conftest import Api, assert_problem, token_for


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_page_makes_a_token_shows_it_once_and_stores_only_its_hash(people: dict[str, User]) -> None:
    client = logged_in(people["operator"])
    page = client.post("/account/tokens/", {"name": "ci", "scopes": ["read", "run"], "expires_in_days": "30"})
    # Shown in the POST's own answer, never kept in the session (tests/security/test_secret_pages.py).
    assert page.status_code == 200 and page["Cache-Control"] == "no-store"
    shown = re.search(r'<code id="new-token">(sf_[0-9a-f]{12}_[A-Za-z0-9_-]+)</code>', page.content.decode())
    assert shown, page.content.decode()
    plaintext = shown.group(1)
    token = ApiToken.objects.get(user=people["operator"])
    assert token.scopes == ["read", "run"] and token.name == "ci"
    assert token.expires_at is not None and token.expires_at > timezone.now() + timedelta(days=29)
    secret = plaintext.split("_", 2)[2]
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in str(list(ApiToken.objects.values()))  # only the hash is at rest
    # Listed, but never shown again.
    again = client.get("/account/tokens/").content.decode()
    assert "ci" in again and f"sf_{token.key}_…" in again and plaintext not in again
    assert Api(Client(), plaintext).get("instances").status_code == 200


def test_the_page_offers_only_scopes_the_user_holds(people: dict[str, User]) -> None:
    page = logged_in(people["viewer"]).get("/account/tokens/").content.decode()
    assert 'value="read"' in page and 'value="operate"' not in page and 'value="design"' not in page
    refused = logged_in(people["viewer"]).post("/account/tokens/", {"name": "x", "scopes": ["operate"]})
    assert refused.status_code == 200 and not ApiToken.objects.exists()
    with pytest.raises(ValueError, match="no permission of the scope"):
        tokens.issue(people["viewer"], "x", ["operate"])
    with pytest.raises(ValueError, match="unknown scope"):
        tokens.issue(people["viewer"], "x", ["admin"])


def test_the_anonymous_are_sent_to_log_in(db: None) -> None:
    response = Client().get("/account/tokens/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_revoked_token_is_refused(people: dict[str, User]) -> None:
    plaintext = token_for(people["viewer"])
    assert Api(Client(), plaintext).get("instances").status_code == 200
    token = ApiToken.objects.get(user=people["viewer"])
    # Someone else cannot revoke it.
    assert logged_in(people["operator"]).post(f"/account/tokens/{token.pk}/revoke").status_code == 404
    response = logged_in(people["viewer"]).post(f"/account/tokens/{token.pk}/revoke")
    assert response.status_code == 302
    assert_problem(Api(Client(), plaintext).get("instances"), 401, "revoked")
    assert "revoked" in logged_in(people["viewer"]).get("/account/tokens/").content.decode()


def test_an_expired_token_is_refused(people: dict[str, User]) -> None:
    issued = tokens.issue(people["viewer"], "old", ["read"], expires_at=timezone.now() + timedelta(minutes=1))
    assert Api(Client(), issued.plaintext).get("instances").status_code == 200
    ApiToken.objects.filter(pk=issued.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    body = assert_problem(Api(Client(), issued.plaintext).get("instances"), 401, "expired")
    assert body["type"] == "urn:steadyflow:problem:unauthenticated"


@pytest.mark.parametrize("presented", ["nonsense", "sf_", "sf_000000000000_wrong", "sf_abc"])
def test_unknown_or_malformed_tokens_are_refused(people: dict[str, User], presented: str) -> None:
    real = tokens.issue(people["viewer"], "t", ["read"])
    response = Api(Client(), presented).get("instances")
    assert_problem(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")
    # The right key with a wrong secret is no better.
    assert_problem(Api(Client(), f"sf_{real.token.key}_wrong").get("instances"), 401, "invalid token")


def test_no_credentials_is_a_401_problem(db: None) -> None:
    assert_problem(Api(Client()).get("instances"), 401, "authentication required")


def test_an_inactive_users_token_is_refused(people: dict[str, User]) -> None:
    plaintext = token_for(people["viewer"])
    User.objects.filter(pk=people["viewer"].pk).update(is_active=False)
    assert_problem(Api(Client(), plaintext).get("instances"), 401, "inactive")


def test_last_used_is_written_at_most_once_a_minute(people: dict[str, User]) -> None:
    issued = tokens.issue(people["viewer"], "t", ["read"])
    assert issued.token.last_used_at is None
    now = timezone.now()
    tokens.authenticate(issued.plaintext, now=now)
    assert ApiToken.objects.get(pk=issued.token.pk).last_used_at == now
    tokens.authenticate(issued.plaintext, now=now + timedelta(seconds=30))
    assert ApiToken.objects.get(pk=issued.token.pk).last_used_at == now  # not written again
    later = now + timedelta(seconds=61)
    tokens.authenticate(issued.plaintext, now=later)
    assert ApiToken.objects.get(pk=issued.token.pk).last_used_at == later


def test_a_scope_missing_from_the_token_is_a_403(as_role: Any) -> None:
    reader = as_role("operator", "read")
    body = assert_problem(reader.post("breakers/llm:x/reset"), 403, "lacks the 'operate' scope")
    assert body["type"] == "urn:steadyflow:problem:forbidden"


def test_a_token_never_exceeds_its_users_permissions(people: dict[str, User]) -> None:
    """A token made while its user was an operator keeps its `operate` scope, but once the user leaves the
    operators group the user's permissions refuse."""
    from workflows.models import BreakerState

    BreakerState.objects.create(key="llm:x", state="open", opened_at=timezone.now().timestamp())
    operator = people["operator"]
    plaintext = token_for(operator, "read", "operate")
    operator.groups.clear()
    response = Api(Client(), plaintext).post("breakers/llm:x/reset")
    assert_problem(response, 403, "permission denied: you need workflows.change_breakerstate")
    assert BreakerState.objects.get(key="llm:x").state == "open"


@override_settings(STEADYFLOW={**__import__("django.conf").conf.settings.STEADYFLOW, "API_RATE_LIMIT": 3,
                               "API_RATE_WINDOW_S": 3600})
def test_the_rate_limit_answers_429_with_retry_after(people: dict[str, User]) -> None:
    api = Api(Client(), token_for(people["viewer"]))
    other = Api(Client(), token_for(people["viewer"]))
    for _ in range(3):
        assert api.get("instances").status_code == 200
    response = api.get("instances")
    body = assert_problem(response, 429, "rate limit of 3 requests per 3600 s")
    assert body["type"] == "urn:steadyflow:problem:rate-limited"
    assert 1 <= int(response["Retry-After"]) <= 3600
    # Per user (tests/security/test_user_rate_limits.py): another token or the session shares the budget.
    assert other.get("instances").status_code == 429
    assert logged_in(people["viewer"]).get("/api/v1/instances").status_code == 429
    assert Api(Client(), token_for(people["designer"])).get("instances").status_code == 200
