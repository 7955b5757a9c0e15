"""The SSRF guard, with an injected resolver (no real DNS)."""

from __future__ import annotations

import pytest

from workflows.engine import ssrf
from workflows.engine.errors import OutboundBlocked


def resolver(table: dict[str, list[str]]) -> ssrf.Resolver:
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return table[host]

    resolve.asked = asked  # type: ignore[attr-defined]
    return resolve


PUBLIC = resolver({"example.com": ["93.184.216.34"], "v6.example.com": ["2606:2800:220:1:248:1893:25c8:1946"]})


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.8.9.10", "10.0.0.5", "172.16.3.4", "192.168.1.1", "169.254.169.254", "0.0.0.0",
    "100.64.0.1", "::1", "::", "fe80::1", "fe80::1%eth0", "fd12:3456::1", "::ffff:127.0.0.1",
    "::ffff:169.254.169.254", "::ffff:10.1.2.3", "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1",
    "2002:a00:1::1", "224.0.0.1", "ff02::1", "255.255.255.255",
])
def test_internal_addresses_are_refused(address: str) -> None:
    resolve = resolver({"inside.test": [address]})
    with pytest.raises(OutboundBlocked) as info:
        ssrf.check_url("https://inside.test/path", [], resolve=resolve)
    assert info.value.permanent
    assert info.value.message == (f"outbound request to inside.test ({address}) refused: private or loopback "
                                  "address not in STEADYFLOW_HTTP_ALLOWLIST")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/x", "http://[::1]/", "http://169.254.169.254/latest/meta-data"])
def test_ip_literals_are_checked_too(url: str) -> None:
    # The real resolver: getaddrinfo returns an IP literal as it is, without asking DNS.
    with pytest.raises(OutboundBlocked, match="refused: private or loopback"):
        ssrf.check_url(url, [])


def test_public_addresses_pass() -> None:
    resolve = resolver({"example.com": ["93.184.216.34"], "v6.example.com": ["2606:2800:220:1:248:1893:25c8:1946"],
                        "nat64.example.com": ["64:ff9b::808:808"]})
    ssrf.check_url("https://example.com/a?b=c", [], resolve=resolve)
    ssrf.check_url("http://v6.example.com:8080/", [], resolve=resolve)
    ssrf.check_url("http://nat64.example.com/", [], resolve=resolve)
    assert resolve.asked == [("example.com", 443), ("v6.example.com", 8080),  # type: ignore[attr-defined]
                             ("nat64.example.com", 80)]


def test_a_name_with_one_internal_address_among_public_ones_is_refused() -> None:
    resolve = resolver({"mixed.test": ["93.184.216.34", "10.0.0.1"]})
    with pytest.raises(OutboundBlocked, match=r"mixed\.test \(10\.0\.0\.1\)"):
        ssrf.check_url("http://mixed.test/", [], resolve=resolve)


def test_allow_list_by_host() -> None:
    resolve = resolver({"internal.svc": ["10.0.0.7"]})
    ssrf.check_url("http://internal.svc/x", ["internal.svc"], resolve=resolve)
    ssrf.check_url("http://INTERNAL.svc:9000/x", [" Internal.SVC "], resolve=resolve)
    with pytest.raises(OutboundBlocked):
        ssrf.check_url("http://internal.svc/x", ["other.svc", ""], resolve=resolve)


def test_allow_list_by_host_and_port() -> None:
    resolve = resolver({"internal.svc": ["10.0.0.7"]})
    ssrf.check_url("http://internal.svc:8080/", ["internal.svc:8080"], resolve=resolve)
    ssrf.check_url("https://internal.svc/", ["internal.svc:443"], resolve=resolve)
    with pytest.raises(OutboundBlocked):
        ssrf.check_url("http://internal.svc:8081/", ["internal.svc:8080"], resolve=resolve)
    with pytest.raises(OutboundBlocked):
        ssrf.check_url("http://internal.svc/", ["internal.svc:443"], resolve=resolve)


def test_allow_list_by_network() -> None:
    resolve = resolver({"a.svc": ["10.1.2.3"], "b.svc": ["10.9.0.1"], "both.svc": ["10.1.0.1", "10.9.0.1"],
                        "v6.svc": ["fd00::5"]})
    ssrf.check_url("http://a.svc/", ["10.1.0.0/16"], resolve=resolve)
    ssrf.check_url("http://v6.svc/", ["fd00::/8"], resolve=resolve)
    with pytest.raises(OutboundBlocked):
        ssrf.check_url("http://b.svc/", ["10.1.0.0/16"], resolve=resolve)
    # Every address the name resolves to must lie inside the allowed network.
    with pytest.raises(OutboundBlocked):
        ssrf.check_url("http://both.svc/", ["10.1.0.0/16"], resolve=resolve)
    ssrf.check_url("http://127.0.0.1:9/", ["127.0.0.1/32"])


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/",
                                 "javascript:alert(1)", "EXAMPLE.COM/path", "//example.com/x"])
def test_non_http_schemes_are_refused(url: str) -> None:
    with pytest.raises(OutboundBlocked, match="is not allowed \\(http or https only\\)") as info:
        ssrf.check_url(url, ["example.com"], resolve=PUBLIC)
    assert info.value.permanent


def test_a_url_without_host_is_refused() -> None:
    with pytest.raises(OutboundBlocked, match="URL has no host"):
        ssrf.check_url("http:///nohost", [], resolve=PUBLIC)


@pytest.mark.parametrize("url", ["http://example.com:99999/", "http://[::1/"])
def test_a_malformed_url_is_refused_not_crashed_on(url: str) -> None:
    with pytest.raises(OutboundBlocked, match="invalid URL") as info:
        ssrf.check_url(url, [], resolve=PUBLIC)
    assert info.value.permanent


def test_the_real_resolver_answers_for_a_literal_without_dns() -> None:
    assert ssrf._resolve("127.0.0.1", 80) == ["127.0.0.1"]
