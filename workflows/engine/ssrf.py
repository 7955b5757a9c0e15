"""The SSRF guard: outbound requests to private, loopback, link-local or otherwise internal
addresses are refused unless the host (or a network containing it) is allow-listed.

Every address a host name resolves to is checked, so a public name pointing inside is refused too.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from workflows.engine.errors import OutboundBlocked

Resolver = Callable[[str, int], list[str]]
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # the well-known prefix: IPv4 reached through a NAT64


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise OutboundBlocked(f"cannot resolve host {host!r}: {exc.strerror}", permanent=False) from None
    return sorted({str(info[4][0]) for info in infos})


def _is_internal(address: str) -> bool:
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%", 1)[0])
    # IPv6 forms that carry an IPv4 address (mapped, 6to4, NAT64) are judged by that address.
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        elif ip.sixtofour:
            ip = ip.sixtofour
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return not ip.is_global or ip.is_multicast


def _allowed(host: str, port: int, addresses: Iterable[str], allowlist: Iterable[str]) -> bool:
    for entry in allowlist:
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry in (host.lower(), f"{host.lower()}:{port}"):
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if all(ipaddress.ip_address(a.split("%", 1)[0]) in network for a in addresses):
            return True
    return False


def check_url(url: str, allowlist: Iterable[str], resolve: Resolver = _resolve) -> None:
    try:
        parts = urlsplit(url)
        explicit_port = parts.port
    except ValueError as exc:  # "Port out of range", "Invalid IPv6 URL": a bad URL never gets better
        raise OutboundBlocked(f"invalid URL {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise OutboundBlocked(f"URL scheme {parts.scheme!r} is not allowed (http or https only): {url!r}")
    host = parts.hostname
    if not host:
        raise OutboundBlocked(f"URL has no host: {url!r}")
    port = explicit_port or (443 if parts.scheme == "https" else 80)
    addresses = resolve(host, port)
    internal = [a for a in addresses if _is_internal(a)]
    if internal and not _allowed(host, port, addresses, allowlist):
        raise OutboundBlocked(
            f"outbound request to {host} ({', '.join(internal)}) refused: private or loopback address "
            "not in STEADYFLOW_HTTP_ALLOWLIST"
        )
