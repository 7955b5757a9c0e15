"""Issue 19, items 12 and 9 (session calls): the API's rate limit is per user, across all of the user's
tokens and sessions: making more tokens or switching to the session cookie does not buy more calls.
Another user's budget is their own."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.security import tokens
from workflows.roles import ensure_roles

LIMIT = 4


@pytest.fixture
def limited(settings: Any, redis_conn: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "API_RATE_LIMIT": LIMIT, "API_RATE_WINDOW_S": 3600}


def viewer(name: str) -> User:
    from django.contrib.auth.models import Group

    ensure_roles()
    user = User.objects.create_user(name)
    user.groups.add(Group.objects.get(name="viewers"))
    return user


def with_token(user: User) -> Client:
    plaintext = tokens.issue(user, "t", ["read"]).plaintext
    return Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def with_session(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_many_tokens_and_a_session_share_one_budget(db: None, limited: None) -> None:
    alice, bob = viewer("alice"), viewer("bob")
    clients = [with_token(alice), with_token(alice), with_session(alice), with_token(alice)]
    statuses = [clients[i % len(clients)].get("/api/v1/instances").status_code for i in range(LIMIT)]
    assert statuses == [200] * LIMIT
    for client in clients:
        refused = client.get("/api/v1/instances")
        assert refused.status_code == 429, refused.content
        assert 1 <= int(refused["Retry-After"]) <= 3600
        assert "rate limit" in refused.json()["detail"]
    # The dashboard's JSON endpoints are API calls of the same user too.
    legacy = clients[2].get("/api/node-types")
    assert legacy.status_code == 429 and "rate limit" in legacy.json()["message"]
    # Bob's budget is his own.
    assert with_token(bob).get("/api/v1/instances").status_code == 200
    assert with_session(bob).get("/api/v1/instances").status_code == 200
