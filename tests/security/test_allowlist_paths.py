"""`make run` allow-lists only the demo endpoints' path, not the app's whole host (issue 19, item 3).

The http node's allow-list admitted `127.0.0.1:<port>` so that the examples could call the demo
endpoints, which let a workflow call the app's own unauthenticated endpoints (webhooks, health). An
allow-list entry may now carry a path prefix (`127.0.0.1:8000/demo/`): it admits the internal host
only for URLs under that path (dot segments and encoded slashes do not escape it), and `make run`
writes its entries that way.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import LocalServer, local_server  # noqa: F401 - the fixture
from workflows.engine import outbound, ssrf
from workflows.engine.errors import OutboundBlocked

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("url, admitted", [
    ("http://127.0.0.1:8000/demo/research/battery", True),
    ("http://127.0.0.1:8000/demo/", True),
    ("http://127.0.0.1:8000/demo", False),
    ("http://127.0.0.1:8000/demox/a", False),
    ("http://127.0.0.1:8000/hooks/flow/abc", False),
    ("http://127.0.0.1:8000/healthz", False),
    ("http://127.0.0.1:8000/demo/../hooks/flow/abc", False),
    ("http://127.0.0.1:8000/demo/%2e%2e/hooks", False),
    ("http://127.0.0.1:8000/demo%2f..%2fhooks", False),
    ("http://127.0.0.1:8001/demo/research", False),
    ("http://localhost:8000/demo/ledger/refund?x=1", True),
])
def test_a_path_prefix_entry_admits_only_urls_under_it(url: str, admitted: bool) -> None:
    policy = ssrf.Policy(allowlist=("127.0.0.1:8000/demo/", "localhost:8000/demo/"),
                         resolve=lambda host, port: ["127.0.0.1"])
    narrowed = ssrf.policy_for_url(policy, url)
    _, host, port = ssrf.split_url(url)
    if admitted:
        ssrf.resolve_checked(host, port, narrowed)
    else:
        with pytest.raises(OutboundBlocked):
            ssrf.resolve_checked(host, port, narrowed)


def test_host_entries_keep_working() -> None:
    policy = ssrf.Policy(allowlist=("127.0.0.1", "10.0.0.0/8"))
    assert ssrf.policy_for_url(policy, "http://127.0.0.1:9/anything") == policy


def test_the_client_sends_under_the_prefix_and_refuses_elsewhere(local_server: LocalServer) -> None:  # noqa: F811
    policy = outbound.Policy(allowlist=(f"127.0.0.1:{local_server.port}/json",))
    assert outbound.request("GET", local_server.url("/json"), policy=policy, timeout_s=5).status == 200
    with pytest.raises(OutboundBlocked):
        outbound.request("GET", local_server.url("/status/200"), policy=policy, timeout_s=5)
    with pytest.raises(OutboundBlocked):
        outbound.request("GET", local_server.url("/json/../status/200"), policy=policy, timeout_s=5)
    assert local_server.paths() == ["/json"]


def test_make_run_allow_lists_only_the_demo_path(monkeypatch: Any) -> None:
    spec = importlib.util.spec_from_file_location("devrun_under_test", ROOT / "scripts" / "devrun.py")
    assert spec is not None and spec.loader is not None
    devrun = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "devrun_under_test", devrun)
    spec.loader.exec_module(devrun)
    entries = devrun.demo_allowlist("10.1.2.3", 8123).split(",")
    assert entries == ["10.1.2.3", "127.0.0.1:8123/demo/", "localhost:8123/demo/"]
