"""`{{ secrets.NAME }}` in the engine (engine/secrets.py): placeholders instead of values in everything
rendered or recorded, values only in what the http and llm nodes send, echoes scrubbed."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from tests.engine.conftest import LocalServer, make_call
from tests.engine.test_llm import run as run_llm
from tests.support.llm_server import LLMTestServer
from workflows.engine import expressions
from workflows.engine import secrets as sec
from workflows.engine.errors import ProviderError, StepError
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import EngineConfig

TOKEN = "canary-5f2c9e1d7a-token"  # noqa: S105 - a test value
ALLOWED = EngineConfig(http_allowlist=("127.0.0.1",), default_timeout_s=5)


def rendered(scope: sec.SecretScope, config: dict[str, Any], names: dict[str, Any] | None = None) -> dict[str, Any]:
    """As the runtime's build_call does: protect, then render."""
    return {k: expressions.render(scope.protect(v), names or {"context": {}, "steps": {}, "input": {}})
            for k, v in config.items()}


def test_rendering_never_sees_a_value_and_records_show_the_reference() -> None:
    scope = sec.SecretScope({"crm": TOKEN})
    config = rendered(scope, {"url": "http://x/?key={{ secrets.crm }}&q={{ input.q }}",
                              "headers": {"Authorization": "Bearer {{ secrets.crm }}"}},
                      {"context": {}, "steps": {}, "input": {"q": "hi"}})
    assert TOKEN not in json.dumps(config)
    assert scope.masked(config) == {"url": "http://x/?key={{ secrets.crm }}&q=hi",
                                    "headers": {"Authorization": "Bearer {{ secrets.crm }}"}}
    assert scope.reveal(config)["headers"]["Authorization"] == f"Bearer {TOKEN}"


def test_a_placeholder_that_arrives_through_data_names_no_value() -> None:
    scope = sec.SecretScope({"crm": TOKEN})
    protected = scope.protect("{{ secrets.crm }}")
    forged = protected.replace(protected.split(":")[-1], "0" * 16 + "\u27e7")
    other = sec.SecretScope({"crm": TOKEN})
    # Another attempt's placeholder, or one copied from anywhere, is left as text.
    assert TOKEN not in str(scope.reveal(forged)) and TOKEN not in str(scope.reveal(other.protect("{{ secrets.crm }}")))
    # A reference typed into input is data, not a reference: rendering leaves it as text.
    names = {"context": {}, "steps": {}, "input": {"x": "{{ secrets.crm }}"}}
    config = rendered(scope, {"body": "{{ input.x }}"}, names)
    assert scope.reveal(config) == {"body": "{{ secrets.crm }}"}


def test_scrub_removes_values_bearer_tokens_and_key_like_strings() -> None:
    text = f"bad key {TOKEN}; Authorization: Bearer abcdefgh12345678; other sk-proj-ABCDEFGH12345678 ok"
    out = sec.scrub_text(text, (TOKEN,))
    assert TOKEN not in out and "abcdefgh12345678" not in out and "sk-proj-ABCDEFGH" not in out
    assert out.endswith("ok")
    scope = sec.SecretScope({"crm": TOKEN})
    error = scope.scrub_error(StepError(f"echo {TOKEN}", details={"body": [f"x{TOKEN}x"]}))
    assert TOKEN not in error.message and TOKEN not in json.dumps(error.as_dict()) and TOKEN not in str(error)


def test_echoes_url_encoded_or_json_escaped_are_scrubbed_too() -> None:
    value = 'p@ss w/"quote"&more'
    scope = sec.SecretScope({"pw": value})
    echoed = {"query": "pw=p%40ss+w%2F%22quote%22%26more", "path": "/p%40ss%20w%2F%22quote%22%26more",
              "raw": json.dumps({"pw": value})}
    assert scope.scrub(echoed) == {"query": f"pw={sec.REDACTED}", "path": f"/{sec.REDACTED}",
                                   "raw": json.dumps({"pw": sec.REDACTED})}


def test_the_http_node_sends_values_and_stores_none(local_server: LocalServer) -> None:
    scope = sec.SecretScope({"crm": TOKEN})
    config = rendered(scope, {
        "url": local_server.url("/echo") + "?key={{ secrets.crm }}", "method": "POST",
        "headers": {"X-Api-Key": "{{ secrets.crm }}"}, "params": {"p": "{{ secrets.crm }}"},
        "json": {"token": "{{ secrets.crm }}", "nested": ["pre-{{ secrets.crm }}"]}})
    call = dataclasses.replace(make_call("http", config, node_id="fetch", engine=ALLOWED), secrets=scope)
    result = get_kind("http").run(call)
    # httpx's `params` replace a query in the URL: the URL's own query in a second request.
    query_only = rendered(scope, {"url": local_server.url("/echo") + "?key={{ secrets.crm }}"})
    second = get_kind("http").run(dataclasses.replace(call, config=query_only))
    first, then = local_server.requests
    # The server got every value (so the assertions below would see an echo)...
    assert first.headers["x-api-key"] == [TOKEN]
    assert first.query == {"p": [TOKEN]} and then.query == {"key": [TOKEN]}
    assert json.loads(first.body) == {"token": TOKEN, "nested": [f"pre-{TOKEN}"]}
    # ...and echoed them back (the /echo route), but the outputs hold none.
    assert TOKEN in first.body.decode() and TOKEN not in json.dumps([result.output, second.output])
    assert sec.REDACTED in json.dumps(result.output)


def test_http_errors_name_the_url_as_configured(local_server: LocalServer) -> None:
    scope = sec.SecretScope({"crm": TOKEN})
    config = rendered(scope, {"url": local_server.url("/status/404") + "?key={{ secrets.crm }}"})
    call = dataclasses.replace(make_call("http", config, node_id="fetch", engine=ALLOWED), secrets=scope)
    with pytest.raises(StepError) as caught:
        get_kind("http").run(call)
    assert TOKEN not in json.dumps(caught.value.as_dict())
    assert "{{ secrets.crm }}" in caught.value.message


def test_an_llm_provider_that_echoes_its_key_is_scrubbed() -> None:
    key = "team-a-key-9d8c7b6a5f"
    account = sec.ProviderAccount(name="team-a", base_url="", api_key=key, models=("m1",))
    with LLMTestServer(status=401) as server:
        server.configure(echo_key=True)
        account = dataclasses.replace(account, base_url=server.url)
        # A credential's base URL is typed by a designer: a loopback one must be allow-listed.
        call = dataclasses.replace(make_call("llm", {"prompt": "say {{ secrets.crm }}", "model": "m1",
                                                     "credential": "team-a"}, engine=ALLOWED),
                                   provider=account)
        call = dataclasses.replace(call, secrets=sec.SecretScope({}, scrub_also=(key,)),
                                   config=rendered(sec.SecretScope({}), call.config))
        with pytest.raises(ProviderError) as caught:
            run_llm(call)
        (request,) = server.requests
    assert request["authorization"] == f"Bearer {key}"  # the server had it, and echoed it
    assert key not in json.dumps(caught.value.as_dict())
    assert "Incorrect API key provided" in caught.value.message


def test_an_llm_node_may_only_ask_its_credential_for_allowed_models() -> None:
    account = sec.ProviderAccount(name="team-a", base_url="http://127.0.0.1:9/v1", api_key="k", models=("m1",))
    call = dataclasses.replace(make_call("llm", {"prompt": "hi", "model": "m2", "credential": "team-a"}),
                               provider=account)
    with pytest.raises(ProviderError, match="model 'm2' is not one credential 'team-a' allows") as caught:
        run_llm(call)
    assert caught.value.permanent
    assert sec.check_model("ask", {"model": "m2"}, account)[0].node == "ask"
    assert sec.check_model("ask", {"model": "m1"}, account) == []


def graph_with(node: dict[str, Any], when: str | None = None) -> dict[str, Any]:
    return {"nodes": [{"id": "start", "type": "start"}, node, {"id": "end", "type": "end"}],
            "edges": [{"source": "start", "target": node["id"]},
                      {"source": node["id"], "target": "end", **({"when": when} if when else {})}]}


RAW = {"llm": frozenset({"script", "routes", "credential"})}


@pytest.mark.parametrize(("node", "when", "message"), [
    ({"id": "call", "type": "http", "config": {"url": "http://x/{{ secrets.nope }}"}}, None,
     "node 'call': credential 'nope' does not exist"),
    ({"id": "call", "type": "http", "config": {"url": "http://x/{{ secrets.team }}"}}, None,
     "node 'call': credential 'team' is an LLM provider, not a secret"),
    ({"id": "call", "type": "http", "config": {"url": "http://x/", "headers": {"A": "{{ upper(secrets.crm) }}"}}},
     None, "secrets may only be referenced as {{ secrets.NAME }}"),
    ({"id": "call", "type": "http", "config": {"url": "http://x/"}}, "secrets.crm == 'x'",
     "edge 1: conditions may not read secrets"),
    ({"id": "fn", "type": "python", "config": {"function": "noop", "args": {"t": "{{ secrets.crm }}"}}}, None,
     "node 'fn': {{ secrets.… }} is only sent by http and llm nodes"),
    ({"id": "pick", "type": "router", "config": {"rules": [{"when": "secrets.crm", "route": "a"}]}}, None,
     "node 'pick': conditions may not read secrets"),
    ({"id": "ask", "type": "llm", "config": {"prompt": "hi", "credential": "crm"}}, None,
     "node 'ask': LLM provider credential 'crm' is a secret, not an LLM provider"),
    ({"id": "ask", "type": "llm", "config": {"prompt": "hi", "credential": "gone"}}, None,
     "node 'ask': LLM provider credential 'gone' does not exist"),
    ({"id": "pay", "type": "python", "config": {"function": "noop"},
      "compensate": {"type": "http", "config": {"url": "http://x/{{ secrets.gone }}"}}}, None,
     "node 'pay': credential 'gone' does not exist"),
])
def test_validation_names_the_node_and_the_problem(node: dict[str, Any], when: str | None, message: str) -> None:
    issues = sec.check_graph(graph_with(node, when), {"crm": "secret", "team": "llm_provider"}, RAW)
    assert any(message in issue.message for issue in issues), issues


def test_valid_references_pass() -> None:
    node = {"id": "call", "type": "http", "config": {"url": "http://x/?k={{ secrets.crm }}",
                                                     "headers": {"Authorization": "Bearer {{secrets.crm}}"},
                                                     "json": {"a": ["{{ secrets.crm }}"]}}}
    assert sec.check_graph(graph_with(node), {"crm": "secret"}, RAW) == []
    llm = {"id": "ask", "type": "llm", "config": {"prompt": "key {{ secrets.crm }}", "credential": "team"}}
    assert sec.check_graph(graph_with(llm), {"crm": "secret", "team": "llm_provider"}, RAW) == []
