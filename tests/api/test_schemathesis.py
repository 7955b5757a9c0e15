"""Property-based conformance of the v1 API (schemathesis against the OpenAPI the code generates): requests
generated from the schema, sent in-process to the WSGI app with a superuser's token, must get no 5xx and
answers that match the schema (status codes, content types, bodies, headers). Examples per operation are
capped so the whole run stays well under two minutes (SCHEMATHESIS_EXAMPLES=100 for a deeper run)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from dashboard.api.v1 import api
from dashboard.security import tokens
from tests.api.conftest import HUMAN, SIMPLE
from workflows import runtime
from workflows.authoring.definitions import save_version

schema = schemathesis.openapi.from_dict(api.get_openapi_schema())
schema.app = get_wsgi_application()  # in-process: every request (and every check's probe) goes to the app
CURRENT: dict[str, str] = {}  # the running test's token (each test makes its own: ids return after rollback)


@schema.auth(refresh_interval=None)
class BearerToken:
    """Declared to schemathesis as the auth, so its "ignored auth" check knows the token is real and
    probes that the API refuses the request without it and with a made-up one."""

    def get(self, case: Any, context: Any) -> str:
        return CURRENT.get("token", "")

    def set(self, case: Any, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@pytest.fixture
def token(db: None, redis_conn: Any) -> Iterator[str]:
    """A superuser's token with every scope, and something to find: two workflows, an instance, a task.
    The WSGI handler closes connections at each request's end (Django's test client does not): switched
    off here, so every request runs inside the test's transaction."""
    root = User.objects.create_superuser("root", password=None)
    runtime.start_instance(save_version("simple", SIMPLE), {}, user=root)
    runtime.start_instance(save_version("human", HUMAN), {}, user=root)
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        CURRENT["token"] = tokens.issue(root, "schemathesis", list(tokens.SCOPES)).plaintext
        yield CURRENT["token"]
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=int(os.environ.get("SCHEMATHESIS_EXAMPLES", "12")), deadline=None,
          suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_api_conforms_to_its_schema(case: Any, token: str) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])
    # Every other default check (server errors, status codes, content types, headers, bodies, and that
    # schema-invalid requests are refused). Not "schema-valid data is accepted": the API refuses some
    # schema-valid requests by design, with a 4xx naming why (a NUL character, which PostgreSQL cannot
    # store; an invalid graph; an action a review item does not take).
    case.validate_response(response, excluded_checks=[positive_data_acceptance])
