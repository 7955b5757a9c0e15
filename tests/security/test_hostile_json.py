"""Hostile input against every JSON endpoint: malformed, oversize, over-deep, non-finite, out of range,
not Unicode, wrong shapes. Every answer is a 4xx JSON error with a message naming the problem; never a
500 (Django's test client re-raises a view's exception, so a crash fails the test with its traceback)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from tests.security.conftest import GRAPH, SLUG
from workflows.models import WorkflowInstance, WorkflowVersion


def deep(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


# (name, raw body, words the message must contain)
CORPUS: list[tuple[str, bytes, str]] = [
    ("malformed", b'{"graph": ', "not valid JSON"),
    ("not UTF-8", b'{"a": "\xff\xfe"}', "not UTF-8"),
    ("recursion-deep array", b"[" * 100_000, "nested too deeply"),
    ("recursion-deep object", deep(50_000).encode(), "nested too deeply"),
    ("deep past the limit", deep(65).encode(), "nested too deeply"),
    ("NaN", b'{"input": {"x": NaN}, "graph": NaN, "expression": NaN}', "NaN"),
    ("Infinity", b'{"input": {"x": Infinity}, "graph": {"settings": {"budget_usd": Infinity}}}', "Infinity"),
    ("-Infinity", b'{"expression": -Infinity}', "Infinity"),
    ("1e400", b'{"input": {"x": 1e400}, "step": 1e400}', "too large"),
    ("huge integer", b'{"input": {"x": 100000000000000000000000000000}, "step": 100000000000000000000000000000}',
     "out of range"),
    ("5000-digit integer", b'{"step": ' + b"9" * 5000 + b"}", "out of range"),
    ("lone surrogate value", b'{"input": {"x": "\\ud800"}, "note": "\\udfff", "expression": "\\ud800"}',
     "surrogate"),
    ("lone surrogate key", b'{"input": {"\\ud800": 1}}', "surrogate"),
    ("NUL", b'{"input": {"x": "a\\u0000b"}, "note": "\\u0000", "expression": "a\\u0000"}', "NUL"),
]
OVERSIZE = b'{"input": {"x": "' + b"a" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10) + b'"}}'
WRONG_SHAPES = [b"[]", b'"text"', b"12", b"null", b"true", b'{"graph": "x"}', b'{"input": []}',
                b'{"expression": 5}', b'{"step": "x"}', b'{"node": 5}', b'{"item": "x", "action": 5}',
                b'{"graph": {"nodes": "x"}}', b'{"message": 5, "graph": {}}']


def endpoints(instance: WorkflowInstance, version: WorkflowVersion) -> list[str]:
    return [
        "/api/validate",
        f"/api/workflows/{SLUG}/instances",
        f"/api/workflows/{SLUG}/versions",
        f"/api/workflows/{SLUG}/versions/{version.number}/restore",
        "/api/expressions/check",
        f"/api/instances/{instance.pk}/cancel",
        f"/api/instances/{instance.pk}/retry",
        f"/api/instances/{instance.pk}/rerun",
        f"/api/instances/{instance.pk}/review",
    ]


def post(client: Client, url: str, body: bytes) -> Any:
    return client.post(url, data=body, content_type="application/json")


def assert_json_4xx(response: Any, what: str, words: str = "") -> dict[str, Any]:
    assert 400 <= response.status_code < 500, f"{what}: {response.status_code} {response.content[:300]!r}"
    assert response["Content-Type"].startswith("application/json"), what
    data = json.loads(response.content)
    assert data["message"], what
    if words:
        assert words in data["message"], f"{what}: {data['message']!r} does not say {words!r}"
    return data


def test_every_json_endpoint_answers_the_hostile_corpus_with_a_4xx_naming_the_problem(
        admin_client_: Client, instance: WorkflowInstance, version: WorkflowVersion) -> None:
    for url in endpoints(instance, version):
        for name, body, words in CORPUS:
            assert_json_4xx(post(admin_client_, url, body), f"{url} {name}", words)
        data = assert_json_4xx(post(admin_client_, url, OVERSIZE), f"{url} oversize", "too large")
        assert post(admin_client_, url, OVERSIZE).status_code == 413, data


def test_wrong_shapes_are_refused_or_handled_never_a_crash(
        admin_client_: Client, instance: WorkflowInstance, version: WorkflowVersion) -> None:
    for url in endpoints(instance, version):
        for body in WRONG_SHAPES:
            response = post(admin_client_, url, body)
            assert response.status_code < 500, f"{url} {body!r}: {response.status_code}"
            assert response["Content-Type"].startswith("application/json"), f"{url} {body!r}"


def test_nothing_hostile_was_stored(admin_client_: Client, instance: WorkflowInstance,
                                    version: WorkflowVersion) -> None:
    for _name, body, _ in CORPUS:
        post(admin_client_, f"/api/workflows/{SLUG}/instances", body)
        post(admin_client_, f"/api/workflows/{SLUG}/versions", body)
    assert WorkflowInstance.objects.count() == 1
    assert WorkflowVersion.objects.count() == 1


def test_a_graph_with_an_unbounded_number_is_refused_at_save_and_at_validate(admin_client_: Client,
                                                                          version: WorkflowVersion) -> None:
    graph = {**GRAPH, "settings": {"budget_usd": 1e30}}
    body = json.dumps({"graph": graph, "message": "huge budget", "base_version": version.number}).encode()
    data = assert_json_4xx(post(admin_client_, f"/api/workflows/{SLUG}/versions", body), "save")
    assert any("settings.budget_usd" in e["message"] and "1000000" in e["message"] for e in data["errors"])
    checked = json.loads(post(admin_client_, "/api/validate", json.dumps({"graph": graph}).encode()).content)
    assert checked["valid"] is False


def test_query_parameters_and_ids_past_any_column_are_answered_not_crashed(
        admin_client_: Client, instance: WorkflowInstance, version: WorkflowVersion) -> None:
    huge = "9" * 30
    pages = [
        "/instances/?q=²", "/instances/?q=%C2%B2%C2%B3", f"/instances/?q={huge}", "/instances/?q=%00",
        "/instances/?to=9999-12-31", "/instances/?from=0001-01-01&to=0001-01-01", f"/instances/?page={huge}",
        "/instances/?status=%00&reason=%00&workflow=%00", f"/workflows/{SLUG}/edit/?version=²",
        f"/workflows/{SLUG}/edit/?version={huge}", "/review/?status=%00&reason=%00", f"/review/?page={huge}",
        f"/instances/{huge}/", f"/review/{huge}/", f"/admin/workflows/workflowinstance/{huge}/change/",
        "/admin/workflows/workflowinstance/?q=%00", "/admin/workflows/workflowinstance/?q=²",
    ]
    for url in pages:
        response = admin_client_.get(url, follow=True)
        assert response.status_code < 500, f"{url}: {response.status_code}"
    api = [
        f"/api/instances/{instance.pk}/events?after={huge}", f"/api/instances/{instance.pk}/events?after=²",
        f"/api/instances/{instance.pk}/events?limit=-1", f"/api/instances/{instance.pk}/steps?node=%00",
        f"/api/instances/{huge}", f"/api/instances/{huge}/events", f"/api/instances/{huge}/steps",
        f"/api/workflows/{SLUG}/versions/{huge}", f"/api/workflows/{SLUG}/diff?from=²&to={huge}",
        f"/api/workflows/{SLUG}/diff?from=%00&to=1",
    ]
    for url in api:
        response = admin_client_.get(url)
        assert response.status_code < 500, f"{url}: {response.status_code}"
        assert response["Content-Type"].startswith("application/json"), url


@pytest.mark.parametrize("expression", [
    "1+" * 100_000 + "1", "not " * 100_000 + "x", "-" * 100_000 + "1", "(" * 300 + "1" + ")" * 300,
    "[" * 60 + "]" * 60, "a\x00b", "x" * 100_000, "lambda: 1", "().__class__", "9**9**9**9**9",
])
def test_the_expression_checker_refuses_pathological_conditions(admin_client_: Client, expression: str) -> None:
    response = admin_client_.post("/api/expressions/check", data={"expression": expression},
                                  content_type="application/json")
    if "\x00" in expression:
        assert_json_4xx(response, "NUL", "NUL")
        return
    assert response.status_code == 200
    data = json.loads(response.content)
    # "9**9**9**9**9" included: its constant parts are evaluated at save, within the limits.
    assert data["valid"] is False and data["message"].startswith("condition ")
