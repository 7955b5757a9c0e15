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
    assert ssrf.system_resolver("127.0.0.1", 80) == ["127.0.0.1"]


# Every special-purpose form that reaches inside, or may: IPv4 with the IPv6 spellings that embed it
# (IPv4-compatible, IPv4-mapped, SIIT-translated, NAT64), the tunnels (6to4, Teredo), local-use NAT64,
# CGNAT (cloud metadata at 100.100.100.200), documentation, benchmarking, reserved, broadcast, multicast.
INTERNAL_CORPUS = [
    "::127.0.0.1", "::7f00:1", "::10.0.0.1", "::169.254.169.254", "::8.8.8.8", "::ffff:0:127.0.0.1",
    "0:0:0:0:0:ffff:7f00:1", "::ffff:100.64.0.1", "::ffff:0.0.0.0", "64:ff9b::a00:1", "64:ff9b::0.0.0.0",
    "64:ff9b:1::a00:1", "64:ff9b:1::808:808", "2002:808:808::1", "2002:c0a8:101::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1", "2001:db8::1", "3fff::1", "100::1", "fe80::", "febf::1",
    "fec0::1", "fc00::1", "fdff:ffff::1", "ff05::1", "ff0e::1", "::2", "5f00::1",
    "100.100.100.200", "100.127.255.254", "192.0.0.8", "192.0.2.1", "192.88.99.1", "198.18.0.1",
    "198.19.255.255", "198.51.100.2", "203.0.113.9", "240.0.0.1", "239.255.255.250", "0.1.2.3", "172.31.255.255",
]
PUBLIC_CORPUS = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.1", "172.32.0.1",
                 "2606:4700::1111", "2a00:1450:4001::1", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("address", INTERNAL_CORPUS)
def test_the_internal_corpus_is_internal(address: str) -> None:
    assert ssrf.is_internal(address)
    with pytest.raises(OutboundBlocked, match="refused"):
        ssrf.check_url("https://inside.test/", [], resolve=resolver({"inside.test": [address]}))


@pytest.mark.parametrize("address", PUBLIC_CORPUS)
def test_the_public_corpus_is_public(address: str) -> None:
    assert not ssrf.is_internal(address)


@pytest.mark.parametrize("url", ["http://[::127.0.0.1]/", "http://[::ffff:7f00:1]:8000/", "http://2130706433/",
                                 "http://0x7f.1/", "http://127.1/", "http://017700000001/"])
def test_odd_spellings_of_loopback_are_refused(url: str) -> None:
    # The real resolver: numeric forms glibc accepts come back as the address they spell.
    with pytest.raises(OutboundBlocked, match="refused: private or loopback"):
        ssrf.check_url(url, [])


def test_a_trusted_policy_admits_internal_addresses_but_still_needs_some() -> None:
    trusted = ssrf.Policy(trusted=True, resolve=resolver({"llm.local": ["127.0.0.1"], "void.test": []}))
    assert ssrf.resolve_checked("llm.local", 80, trusted) == ["127.0.0.1"]
    with pytest.raises(OutboundBlocked, match="resolved to no address"):
        ssrf.resolve_checked("void.test", 80, trusted)
