"""Fixtures of the v1 API tests: role users, their tokens, and a client that speaks JSON with a token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from dashboard.security import tokens
from workflows.roles import ensure_roles

PROBLEM = "application/problem+json"
SIMPLE = {
    "nodes": [{"id": "start", "type": "start"}, {"id": "nap", "type": "wait", "config": {"seconds": 60}},
              {"id": "end", "type": "end"}],
    "edges": [{"source": "start", "target": "nap"}, {"source": "nap", "target": "end"}],
}
HUMAN = {
    "nodes": [{"id": "start", "type": "start"},
              {"id": "ask", "type": "human", "config": {"prompt": "Pay?", "assignee_group": "finance"}},
              {"id": "end", "type": "end"}],
    "edges": [{"source": "start", "target": "ask"}, {"source": "ask", "target": "end"}],
}


@dataclass
class Api:
    """A JSON client for /api/v1/ with a bearer token (or a logged-in session when token is None)."""

    client: Client
    token: str | None = None

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> Any:
        extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
        if self.token is not None:
            extra["HTTP_AUTHORIZATION"] = f"Bearer {self.token}"
        url = path if path.startswith("/") else f"/api/v1/{path}"
        data = json.dumps(body) if body is not None and not isinstance(body, (bytes, str)) else body
        return getattr(self.client, method.lower())(url, data=data, content_type="application/json", **extra)

    def get(self, path: str, **headers: str) -> Any:
        return self.call("GET", path, **headers)

    def post(self, path: str, body: Any = None, **headers: str) -> Any:
        return self.call("POST", path, body if body is not None else {}, **headers)


def assert_problem(response: Any, status: int, *fragments: str) -> dict[str, Any]:
    """An RFC 9457 problem document with this status whose detail holds every fragment."""
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"] == PROBLEM, response["Content-Type"]
    body = response.json()
    assert {"type", "title", "status", "detail"} <= set(body), body
    assert body["status"] == status and body["type"].startswith("urn:steadyflow:problem:"), body
    for fragment in fragments:
        assert fragment in body["detail"], body
    return body


@pytest.fixture(autouse=True)
def _fresh_rate_counts(redis_conn: Any) -> Iterator[None]:
    """Token ids come back after a rollback: their request counts must not."""
    yield


@pytest.fixture
def people(db: None) -> dict[str, User]:
    groups = ensure_roles()
    finance = Group.objects.get_or_create(name="finance")[0]

    def make(name: str, *in_groups: Group) -> User:
        user = User.objects.create_user(name)
        user.groups.add(*in_groups)
        return User.objects.get(pk=user.pk)

    return {
        "nobody": User.objects.create_user("nobody"),
        "viewer": make("viewer", groups["viewers"]),
        "designer": make("designer", groups["designers"]),
        "operator": make("operator", groups["operators"], finance),
        "outsider": make("outsider", groups["operators"]),
        "superuser": User.objects.create_superuser("root", password=None),
    }


def token_for(user: User, *scopes: str) -> str:
    return tokens.issue(user, "test", list(scopes or tokens.scopes_for(user))).plaintext


@pytest.fixture
def as_role(people: dict[str, User]) -> Any:
    """as_role("operator", "read", "operate") -> an Api with a token of those scopes (all the user may
    have when none are named)."""

    def make(role: str, *scopes: str) -> Api:
        return Api(Client(), token_for(people[role], *scopes))

    return make
