"""v1 breakers and health; the docs page and schema; the error shapes every v1 URL shares."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.api.conftest import Api, assert_problem, token_for
from workflows.models import BreakerState


def test_breakers_list_and_reset(as_role: Any) -> None:
    BreakerState.objects.create(key="openai:gpt-4o-mini", state="open", opened_at=timezone.now().timestamp())
    items = as_role("viewer").get("breakers").json()["items"]
    assert [(b["key"], b["state"]) for b in items] == [("openai:gpt-4o-mini", "open")]
    assert_problem(as_role("viewer").post("breakers/openai:gpt-4o-mini/reset"), 403, "change_breakerstate")
    reset = as_role("operator").post("breakers/openai:gpt-4o-mini/reset")
    assert reset.status_code == 200 and reset.json()["items"][0]["state"] == "closed"
    assert_problem(as_role("operator").post("breakers/nothing/reset"), 404, "breaker 'nothing' does not exist")


def test_health_needs_no_credentials(db: None) -> None:
    assert Client().get("/api/v1/health").json() == {"ok": True}


def test_docs_page_is_local_and_csp_clean(people: dict[str, User]) -> None:
    client = Client()
    assert client.get("/api/v1/docs")["Location"].startswith("/accounts/login/")
    assert_problem(client.get("/api/v1/openapi.json"), 401)
    assert client.get("/api/docs")["Location"] == "/api/v1/docs"
    client.force_login(people["viewer"])
    page = client.get("/api/v1/docs")
    html = page.content.decode()
    assert page.status_code == 200 and "script-src 'self'" in page["Content-Security-Policy"]
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources and all(s.startswith("/static/") for s in sources), sources  # nothing from another origin
    # Only data blocks inline (application/json), no inline code.
    for attrs, _code in re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S):
        assert "src=" in attrs or 'type="application/json"' in attrs, attrs
    schema = client.get("/api/v1/openapi.json").json()
    assert schema["openapi"].startswith("3.") and "/api/v1/instances" in schema["paths"]
    assert Api(Client(), token_for(people["viewer"])).get("openapi.json").status_code == 200


def test_every_v1_error_is_a_problem(as_role: Any) -> None:
    api = as_role("viewer")
    assert_problem(api.call("PUT", "instances/1"), 405, "PUT not allowed")
    assert_problem(api.get("no/such/thing"), 404, "no API endpoint GET /api/v1/no/such/thing")
    assert_problem(api.get("/api/v1/"), 404)
    assert_problem(api.post("validate", b"[1, 2"), 400)
    assert_problem(api.post("validate", b'{"graph": {"a": 1e999}}'), 400)
    body = assert_problem(api.post("validate", {}), 422)
    assert body["errors"] == [{"field": "body.graph", "message": "Field required"}]
    assert body["instance"] == "/api/v1/validate"


def test_a_path_no_pattern_matches_is_still_a_problem(as_role: Any) -> None:
    """Django's path converters do not match a newline: the 404 handler answers for the API too."""
    assert_problem(as_role("operator").post("breakers/a%0Ab/reset"), 404, "no API endpoint")
    assert Client().get("/api/a%0Ab")["Content-Type"] == "application/json"
    assert Client().get("/nowhere%0A")["Content-Type"].startswith("text/html")


def test_a_body_too_large_is_a_413_problem(as_role: Any, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 200
    body = assert_problem(as_role("viewer").post("validate", {"graph": {"nodes": ["x" * 300]}}), 413, "too large")
    assert body["type"] == "urn:steadyflow:problem:too-large"
