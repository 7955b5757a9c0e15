"""A secret goes only where the graph (and its credential) says, never where data says (issue 19, item 6).

A graph with a secret in a header and a templated URL (`{{ input.u }}`) used to send the secret to a
host chosen at run time. Now a node that uses a secret must name its host literally (checked at
save), and at run time the resolved URL's host must be the host the URL had at save and, when the
credential declares one (its URL), the credential's host.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import chain
from tests.engine.conftest import make_call
from workflows.credentials.store import validate
from workflows.engine.errors import PermanentStepError
from workflows.engine.nodes import get_kind
from workflows.engine.secrets import SecretScope
from workflows.models import Credential

HEADERS = {"Authorization": "Bearer {{ secrets.crm_token }}"}


def planted(base_url: str = "") -> None:
    credential = Credential(name="crm_token", kind="secret", base_url=base_url)
    credential.set_value("v-123")
    credential.save()


def http(url: str, **config: Any) -> dict[str, Any]:
    return chain({"id": "call", "type": "http", "config": {"url": url, "headers": HEADERS, **config}})


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["{{ input.u }}", "https://{{ input.host }}/x", "https://api.example.com{{ input.p }}",
                                 "https://{{ input.sub }}.example.com/x", "{{ input.scheme }}://api.example.com/x",
                                 "https://api.example.com:{{ input.port }}/x"])
def test_a_node_using_a_secret_must_name_its_host_literally(url: str) -> None:
    planted()
    issues = validate(http(url))
    assert [(i.node, i.field) for i in issues] == [("call", "config.url")], issues
    assert "host" in issues[0].message


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["https://api.example.com/v1/{{ input.path }}?q={{ input.q }}",
                                 "https://api.example.com/{{ input.p }}"])
def test_templated_paths_and_queries_are_fine(url: str) -> None:
    planted()
    assert validate(http(url)) == []
    # Without a secret, a templated host is the http node's ordinary business.
    assert validate(chain({"id": "call", "type": "http", "config": {"url": "{{ input.u }}"}})) == []


@pytest.mark.django_db
def test_the_credentials_declared_host_binds_the_literal_host_at_save() -> None:
    planted(base_url="https://api.example.com/")
    assert validate(http("https://api.example.com/v1")) == []
    issues = validate(http("https://elsewhere.example.net/v1"))
    assert [i.field for i in issues] == ["config.url"] and "api.example.com" in issues[0].message


def run_http(raw_url: str, rendered_url: str, scope: SecretScope) -> None:
    header = scope.protect(HEADERS["Authorization"])
    call = make_call("http", {"url": rendered_url, "headers": {"Authorization": header}})
    call.node = type(call.node)(id="call", type="http", config={"url": raw_url, "headers": HEADERS})
    call.secrets = scope
    get_kind("http").run(call)


def test_at_run_time_the_resolved_host_must_be_the_saved_one() -> None:
    # A graph stored before the save check, or a path template that moved the host (`@evil`).
    scope = SecretScope({"crm_token": "v-123"})
    with pytest.raises(PermanentStepError, match="host is templated"):
        run_http("https://api.example.com{{ input.p }}", "https://api.example.com@evil.example.net/x", scope)
    with pytest.raises(PermanentStepError, match="host is templated"):
        run_http("{{ input.u }}", "https://evil.example.net/x", scope)
    with pytest.raises(PermanentStepError, match="evil.example.net, not api.example.com"):
        run_http("https://api.example.com/x", "https://evil.example.net/x", scope)


def test_at_run_time_the_host_must_be_the_credentials() -> None:
    scope = SecretScope({"crm_token": "v-123"}, hosts={"crm_token": "api.example.com"})
    with pytest.raises(PermanentStepError, match="crm_token.*api.example.com"):
        run_http("https://other.example.net/x", "https://other.example.net/x", scope)
