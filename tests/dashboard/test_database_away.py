"""What the web process answers while the database is away (a crash, a restart, a full disk): a 503
naming the database, with Retry-After, instead of a bare 500 page (dashboard/urls.py handler500). The
web process stays up and answers again once the database is back (tests/faults/test_database_crash.py
checks that against a real crash). Here every query of the request's thread fails as a dropped
connection does."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import OperationalError, connection
from django.test import Client

from workflows.roles import ensure_roles


def refuse(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    raise OperationalError("server closed the connection unexpectedly")


@pytest.fixture
def logged_in(db: None, settings: Any) -> Iterator[Client]:
    settings.DEBUG = False
    ensure_roles()
    user = User.objects.create_user("dana", password="x-unused-x")
    user.groups.add(Group.objects.get(name="viewers"))
    client = Client(raise_request_exception=False)
    client.force_login(user)
    yield client


@pytest.mark.parametrize("path", ["/", "/instances/"])
def test_a_page_says_the_database_is_away(logged_in: Client, path: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with connection.execute_wrapper(refuse):
        responses = [logged_in.get(path) for _ in range(5)]
    assert [r.status_code for r in responses] == [503] * 5
    assert responses[0]["Retry-After"] == "5"
    assert b"The database is not answering" in responses[0].content
    assert logged_in.get(path).status_code == 200  # back: the same client, nothing else to do
    # The log says so once per episode (dashboard/database_away.py), not with a traceback per request.
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 2, loud
    assert "web: the database is not answering" in loud[0]
    assert "answers again" in loud[1] and "(5 request(s) answered 503)" in loud[1]


def test_the_json_api_says_so_in_json(logged_in: Client) -> None:
    with connection.execute_wrapper(refuse):
        response = logged_in.get("/api/instances/1")
    assert response.status_code == 503, response.status_code
    assert "The database is not answering" in response.json()["message"]


def test_other_failures_stay_a_500(logged_in: Client) -> None:
    def broken(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        raise RuntimeError("a bug")

    with connection.execute_wrapper(broken):
        response = logged_in.get("/")
    assert response.status_code == 500


def test_the_v1_api_says_so_as_a_problem_document(db: None, settings: Any, caplog: pytest.LogCaptureFixture) -> None:
    """django-ninja answers the v1 API's errors itself (dashboard/api/v1/problems.py): the database away
    is a 503 problem document with Retry-After there too, logged once per episode (before: 500, "internal
    error", a traceback per request)."""
    from dashboard.security import tokens

    settings.DEBUG = False
    ensure_roles()
    user = User.objects.create_user("vic")
    user.groups.add(Group.objects.get(name="viewers"))
    token = tokens.issue(user, "test", ["read"]).plaintext
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/v1/instances").status_code == 200
    caplog.set_level(logging.INFO)
    with connection.execute_wrapper(refuse):
        responses = [client.get("/api/v1/instances") for _ in range(3)]
    assert [r.status_code for r in responses] == [503] * 3, [r.content[:200] for r in responses]
    body = responses[0].json()
    assert body["type"] == "urn:steadyflow:problem:unavailable" and "database" in body["detail"], body
    assert responses[0]["Retry-After"] == "5"
    assert not any(r.exc_info for r in caplog.records)
