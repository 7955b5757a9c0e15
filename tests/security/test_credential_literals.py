"""Credentials typed literally into a graph are refused at save (issue 19, item 2).

An `Authorization` or `X-Api-Key` header, `?api_key=` in a URL, a token param or a password in a JSON
body used to be stored and shown to every viewer (version API, diffs, editor, a run's step inputs).
Now the save names the node and the field and points to `{{ secrets.NAME }}`; and what a run records
as a step's input never holds a rendered secret, nor a credential-named value that came from data.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.conftest import chain
from workflows.authoring.definitions import save_version
from workflows.credentials.store import validate
from workflows.engine.errors import GraphInvalid
from workflows.models import Credential

KEY = "Zk3xQ9vT2mL8wR5nB7cY1pD4"  # noqa: S105 - 24 random-looking characters


def http(config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return chain({"id": "call", "type": "http", "config": {"url": "https://api.example.com/v1", **config}, **extra})


LITERALS = [
    ({"headers": {"Authorization": "Bearer abc123def456"}}, "config.headers.Authorization"),
    ({"headers": {"X-Api-Key": "k-1234"}}, "config.headers.X-Api-Key"),
    ({"headers": {"Cookie": "session=abcdef"}}, "config.headers.Cookie"),
    ({"headers": {"X-Trace": KEY}}, "config.headers.X-Trace"),
    ({"url": "https://api.example.com/v1?q=cats&api_key=abcd1234"}, "config.url"),
    ({"url": "https://api.example.com/v1?access_token=abcd1234"}, "config.url"),
    ({"url": "https://bob:hunter22@api.example.com/v1"}, "config.url"),
    ({"params": {"token": "abcdef"}}, "config.params.token"),
    ({"params": {"key": KEY}}, "config.params.key"),
    ({"method": "POST", "json": {"user": "bob", "password": "hunter2"}}, "config.json.password"),
    ({"method": "POST", "json": {"auth": {"client_secret": "xyz"}}}, "config.json.auth.client_secret"),
    ({"method": "POST", "json": {"items": [{"note": "sk-proj-ABCDEFGH12345678"}]}}, "config.json.items.0.note"),
    ({"method": "POST", "body": "user=bob&password=hunter22"}, "config.body"),
    ({"method": "POST", "body": f"payload {KEY} end"}, "config.body"),
]


@pytest.mark.parametrize("config, field", LITERALS)
def test_a_credential_literal_is_refused_naming_the_field(db: None, config: dict[str, Any], field: str) -> None:
    issues = validate(http(config))
    assert [(i.node, i.field) for i in issues] == [("call", field)], issues
    assert "{{ secrets.NAME }}" in issues[0].message and field in issues[0].message


def test_literals_in_compensations_and_tool_targets_are_refused_too(db: None) -> None:
    graph = chain({"id": "agent", "type": "llm", "config": {
        "provider": "scripted", "script": [{"text": "ok"}], "prompt": "go",
        "tools": [{"name": "t", "target": {"type": "http", "config": {
            "url": "https://api.example.com/?apikey=abcdef12"}}}]},
        "compensate": {"type": "http", "config": {"url": "https://api.example.com/undo",
                                                  "headers": {"Authorization": "Basic dXNlcjpwYXNz"}}}})
    assert sorted(i.field for i in validate(graph)) == ["compensate.config.headers.Authorization",
                                                         "config.tools.0.target.config.url"]


ACCEPTED = [
    {"headers": {"Authorization": "Bearer {{ secrets.crm_token }}", "Content-Type": "application/json"}},
    {"headers": {"X-Api-Key": "{{ input.key }}", "Accept": "text/plain"}},
    {"url": "https://api.example.com/v1?q={{ input.q }}&page=2&api_key={{ secrets.crm_token }}"},
    {"params": {"token_count": 5, "key": "order-123", "id": "3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b"}},
    {"method": "POST", "json": {"messages": [{"role": "user", "content": "What is my password policy?"}],
                                "password_policy": {"min": 10}, "max_tokens": 20}},
    {"method": "POST", "body": "hello {{ input.name }}, your order is on its way"},
]


@pytest.mark.parametrize("config", ACCEPTED)
def test_references_data_and_ordinary_values_are_accepted(db: None, config: dict[str, Any]) -> None:
    credential = Credential(name="crm_token", kind="secret")
    credential.set_value("v")
    credential.save()
    assert validate(http(config)) == []


def test_the_save_api_answers_400_pointing_to_the_store(admin_client_: Client) -> None:
    save_version("literal", chain())
    response = admin_client_.post("/api/workflows/literal/versions", data=json.dumps(
        {"graph": http({"headers": {"Authorization": "Bearer abc123def456"}}), "base_version": 1,
         "message": "m"}), content_type="application/json")
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["node"] == "call" and error["field"] == "config.headers.Authorization"
    assert "{{ secrets.NAME }}" in error["message"]
    assert "abc123def456" not in response.content.decode()
    with pytest.raises(GraphInvalid):
        save_version("literal", http({"params": {"password": "hunter2"}}))


@pytest.mark.django_db(transaction=True)
def test_step_inputs_never_hold_a_rendered_secret_or_a_credential_from_data(redis_conn: Any) -> None:
    from workflows import runtime
    from workflows.models import StepRun
    from workflows.scheduler.inprocess import drain

    secret = "planted-Secret-7731"
    from_data = "from-data-Credential-5521"
    credential = Credential(name="crm_token", kind="secret")
    credential.set_value(secret)
    credential.save()
    version = save_version("recorded", http({
        "url": "https://127.0.0.1:9/x?api_key={{ input.k }}&s={{ secrets.crm_token }}",
        "headers": {"Authorization": "Bearer {{ secrets.crm_token }}", "X-Auth-Token": "{{ input.k }}",
                    "X-Plain": "{{ input.plain }}"},
        "params": {"token": "{{ input.k }}", "q": "{{ secrets.crm_token }}"},
        "method": "POST", "json": {"login": {"password": "{{ input.k }}"}, "s": "{{ secrets.crm_token }}"}},
        retry={"max_attempts": 1}))
    instance = runtime.start_instance(version, {"k": from_data, "plain": "shown-as-is"})
    drain()
    step = StepRun.objects.get(instance=instance, node_id="call")
    assert step.status == "failed"
    recorded = json.dumps(step.input)
    assert secret not in recorded and from_data not in recorded, recorded
    assert "{{ secrets.crm_token }}" in recorded and "shown-as-is" in recorded


def test_the_recorded_url_keeps_everything_it_does_not_mask() -> None:
    from workflows.engine.literal_credentials import masked_request

    url = "http://h.example/p?t={{ secrets.crm_token }}&q=a+b&api_key=from-data&x=%20y"
    assert masked_request({"url": url})["url"] == ("http://h.example/p?t={{ secrets.crm_token }}&q=a+b&api_key=***"
                                                   "&x=%20y")
    assert masked_request({"url": "https://bob:pw-from-data@h.example/"})["url"] == "https://bob:***@h.example/"
    assert masked_request({"url": "http://h.example/?q=1"})["url"] == "http://h.example/?q=1"
