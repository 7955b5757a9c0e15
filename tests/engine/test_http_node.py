"""The http node against a real HTTP server in a thread on 127.0.0.1 (allow-listed)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from tests.engine.conftest import TRACEPARENT, LocalServer, Seen, make_call
from workflows.engine.errors import OutboundBlocked, PermanentStepError, StepError, StepTimeout
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import EngineConfig, NodeResult

HTTP = get_kind("http")
ALLOWED = EngineConfig(http_allowlist=("127.0.0.1",), default_timeout_s=5)


def call_http(server: LocalServer, path: str, engine: EngineConfig = ALLOWED, node_extra: dict[str, Any] | None = None,
              **config: Any) -> NodeResult:
    return HTTP.run(make_call("http", {"url": server.url(path), **config}, node_id="fetch", engine=engine,
                              node_extra=node_extra))


def test_get_json_with_idempotency_key_and_traceparent(local_server: LocalServer) -> None:
    result = call_http(local_server, "/json", headers={"Accept": "application/json"})
    assert result.output == {"status": 200, "body": {"ok": True, "method": "GET"}}
    (request,) = local_server.requests
    assert request.headers["idempotency-key"] == ["7:fetch:1"]
    assert request.headers["traceparent"] == [TRACEPARENT]
    assert request.headers["accept"] == ["application/json"]


def test_save_as_stores_the_response_body_in_the_context(local_server: LocalServer) -> None:
    result = call_http(local_server, "/json", save_as="order")
    assert result.output == {"status": 200, "body": {"ok": True, "method": "GET"}}
    assert result.context_updates == {"order": {"ok": True, "method": "GET"}}
    assert call_http(local_server, "/json").context_updates == {}


def test_the_step_key_replaces_a_configured_one_whatever_its_case(local_server: LocalServer) -> None:
    call_http(local_server, "/json", headers={"idempotency-key": "mine", "X-Other": "kept"})
    (request,) = local_server.requests
    assert request.headers["idempotency-key"] == ["7:fetch:1"]
    assert request.headers["x-other"] == ["kept"]


def test_a_configured_traceparent_is_kept(local_server: LocalServer) -> None:
    theirs = "00-11111111111111111111111111111111-2222222222222222-01"
    call_http(local_server, "/json", headers={"TraceParent": theirs})
    (request,) = local_server.requests
    assert request.headers["traceparent"] == [theirs]


def test_post_json_body_and_query_parameters(local_server: LocalServer) -> None:
    result = call_http(local_server, "/echo", method="POST", json={"amount": 12, "items": ["a"]}, params={"q": "x"})
    body = result.output["body"]
    assert body["method"] == "POST"
    assert body["query"] == {"q": ["x"]}
    assert json.loads(body["body"]) == {"amount": 12, "items": ["a"]}
    (request,) = local_server.requests
    assert request.headers["content-type"] == ["application/json"]


def test_raw_body(local_server: LocalServer) -> None:
    result = call_http(local_server, "/echo", method="PUT", body="raw text", headers={"Content-Type": "text/plain"})
    assert result.output["body"]["body"] == "raw text"
    assert result.output["body"]["method"] == "PUT"


def test_a_non_json_reply_is_kept_as_text(local_server: LocalServer) -> None:
    assert call_http(local_server, "/text").output == {"status": 200, "body": "plain words"}


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_server_errors_and_429_are_transient(local_server: LocalServer, status: int) -> None:
    with pytest.raises(StepError) as info:
        call_http(local_server, f"/status/{status}")
    assert not info.value.permanent
    assert info.value.details == {"status": status}
    assert info.value.message == f"HTTP {status} from {local_server.url(f'/status/{status}')}"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_client_errors_are_permanent(local_server: LocalServer, status: int) -> None:
    with pytest.raises(PermanentStepError) as info:
        call_http(local_server, f"/status/{status}")
    assert info.value.permanent
    assert info.value.details == {"status": status, "body": f"status {status}"}


def test_timeout_is_a_step_timeout(local_server: LocalServer) -> None:
    with pytest.raises(StepTimeout) as info:
        call_http(local_server, "/slow", timeout_s=0.2)
    assert not info.value.permanent
    assert info.value.message == f"HTTP request to {local_server.url('/slow')} timed out after 0.2 s"


def test_the_node_timeout_applies_when_the_config_has_none(local_server: LocalServer) -> None:
    with pytest.raises(StepTimeout, match="timed out after 0.2 s"):
        call_http(local_server, "/slow", node_extra={"timeout_s": 0.2})


def test_redirects_are_not_followed(local_server: LocalServer) -> None:
    result = call_http(local_server, "/redirect")
    assert result.output["status"] == 302
    assert local_server.paths() == ["/redirect"]


def test_refused_by_the_ssrf_guard_when_not_allow_listed(local_server: LocalServer) -> None:
    with pytest.raises(OutboundBlocked) as info:
        call_http(local_server, "/json", engine=EngineConfig())
    assert info.value.permanent
    assert "refused: private or loopback address not in STEADYFLOW_HTTP_ALLOWLIST" in info.value.message
    assert local_server.requests == []  # nothing was sent


def test_allow_listed_by_host_and_port_only_that_port(local_server: LocalServer) -> None:
    exact = EngineConfig(http_allowlist=(f"127.0.0.1:{local_server.port}",))
    assert call_http(local_server, "/json", engine=exact).output["status"] == 200
    other = EngineConfig(http_allowlist=(f"127.0.0.1:{local_server.port + 1}",))
    with pytest.raises(OutboundBlocked):
        call_http(local_server, "/json", engine=other)


def test_a_non_http_scheme_is_refused() -> None:
    with pytest.raises(OutboundBlocked, match="scheme 'file' is not allowed"):
        HTTP.run(make_call("http", {"url": "file:///etc/passwd"}, engine=ALLOWED))


def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(StepError, match="failed: ConnectError") as info:
        HTTP.run(make_call("http", {"url": f"http://127.0.0.1:{port}/"}, engine=ALLOWED))
    assert not info.value.permanent


def test_an_oversized_body_is_refused(local_server: LocalServer) -> None:
    local_server.routes["/big"] = lambda req: (200, {"Content-Type": "text/plain"}, b"x" * 5_000_001)
    with pytest.raises(PermanentStepError, match="larger than 5000000 bytes"):
        call_http(local_server, "/big")


def test_head_and_delete(local_server: LocalServer) -> None:
    assert call_http(local_server, "/json", method="HEAD").output == {"status": 200, "body": ""}
    assert call_http(local_server, "/json", method="DELETE").output["body"] == {"ok": True, "method": "DELETE"}
    assert [r.method for r in local_server.requests] == ["HEAD", "DELETE"]


def test_each_visit_sends_its_own_key(local_server: LocalServer) -> None:
    for visit in (1, 2):
        HTTP.run(make_call("http", {"url": local_server.url("/json")}, node_id="pay", engine=ALLOWED, visit=visit))
    # Retries of one visit share its key (same StepCall key); a new visit has a new one.
    assert [r.headers["idempotency-key"] for r in local_server.requests] == [["7:pay:1"], ["7:pay:2"]]


def test_the_server_sees_what_was_sent(local_server: LocalServer) -> None:
    seen: list[Seen] = []
    local_server.routes["/spy"] = lambda req: (seen.append(req), (204, {}, b""))[1]
    result = call_http(local_server, "/spy", method="PATCH", json={"a": 1})
    assert result.output == {"status": 204, "body": ""}
    assert seen[0].method == "PATCH" and json.loads(seen[0].body) == {"a": 1}
