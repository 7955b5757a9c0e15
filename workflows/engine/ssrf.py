"""The SSRF guard's address policy: which addresses are internal, and which targets may reach them.

Outbound requests to private, loopback, link-local or otherwise internal addresses are refused unless
the host (or a network containing every address it resolves to) is allow-listed, or the target is
operator-configured (`Policy.trusted`). Every address a host name resolves to is checked, so a public
name pointing inside is refused too. The outbound client (workflows.engine.outbound) calls
`resolve_checked` at connect time and connects to exactly the addresses it returned (pinned
resolution), so a name cannot be re-resolved to somewhere else between the check and the connection.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from workflows.engine.errors import OutboundBlocked

Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Always internal, whatever Python's `is_global` says in a given version. IPv4: this-network,
# private, CGNAT shared space (cloud metadata lives there too), loopback, link-local, IETF protocol
# assignments, documentation, the 6to4 relay anycast, benchmarking, multicast, reserved, broadcast.
_INTERNAL_V4 = tuple(ipaddress.IPv4Network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
))
# IPv6: unspecified, loopback and the deprecated IPv4-compatible ::a.b.c.d (all of ::/96), local-use
# NAT64 (its IPv4 position depends on the operator's prefix length), discard-only, IETF protocol
# assignments (Teredo 2001::/32 among them: it tunnels to any IPv4 host), documentation, 6to4
# (deprecated; tunnels to the IPv4 it embeds), SRv6 SIDs, ULA, link-local, site-local, multicast.
_INTERNAL_V6 = tuple(ipaddress.IPv6Network(n) for n in (
    "::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20",
    "5f00::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
))
# Forms whose meaning is "this IPv4 address": judged by that address (DNS64 hands out the NAT64 form of
# every public IPv4-only site on an IPv6-only network, so it cannot be refused outright).
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def system_resolver(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system resolver, as the connection itself would use)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise OutboundBlocked(f"cannot resolve host {host!r}: {exc.strerror}", permanent=False) from None
    # Keep the resolver's order (address preference) and drop duplicates.
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def parse_address(address: str) -> IPAddress | None:
    """The IP address `address` spells (a zone index dropped), or None for a host name."""
    try:
        return ipaddress.ip_address(address.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None


def is_internal(address: str | IPAddress) -> bool:
    ip = parse_address(address) if isinstance(address, str) else address
    if ip is None:
        raise ValueError(f"not an IP address: {address!r}")
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _MAPPED or ip in _NAT64:
            return is_internal(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if any(ip in network for network in _INTERNAL_V6):
            return True
    elif any(ip in network for network in _INTERNAL_V4):
        return True
    # The catch-all for whatever the lists above miss (Python's own special-purpose registry).
    return (not ip.is_global or ip.is_private or ip.is_reserved or ip.is_multicast or ip.is_loopback
            or ip.is_link_local or ip.is_unspecified)


@dataclass(frozen=True)
class Policy:
    """Where an outbound request may go.

    `allowlist` holds host names, `host:port` pairs and networks (STEADYFLOW_HTTP_ALLOWLIST) that may
    be internal; a `host:port/prefix` entry admits its host only for paths under the prefix
    (`policy_for_url` applies it per request). `trusted` is for targets the operator configured in
    settings (the LLM base URL): any address is allowed, but resolution is still pinned and every
    other limit applies. URLs typed into graphs are never trusted.
    """

    allowlist: tuple[str, ...] = ()
    trusted: bool = False
    resolve: Resolver = system_resolver


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
        parsed = [parse_address(a) for a in addresses]
        if all(ip is not None and ip in network for ip in parsed):
            return True
    return False


def _normalized_path(raw: str) -> str | None:
    """A URL path with its dot segments removed (as the client sends it), or None when it hides a
    separator or a dot segment in percent-encoding or a backslash (never admitted under a prefix)."""
    lowered = raw.lower()
    if "%2f" in lowered or "%2e" in lowered or "%5c" in lowered or "\\" in raw:
        return None
    out: list[str] = []
    for segment in raw.split("/"):
        if segment == "..":
            if len(out) > 1:
                out.pop()
        elif segment != ".":
            out.append(segment)
    path = "/".join(out)
    if raw.endswith(("/.", "/..")):
        path += "/"
    return path if path.startswith("/") else "/" + path


def policy_for_url(policy: Policy, url: str) -> Policy:
    """The policy for one request: allow-list entries with a path prefix (`host:port/prefix/`) admit
    their host only when the URL's path is under the prefix (then they count as `host:port`);
    elsewhere they are left out. Entries without a path apply to every URL, as before."""
    if not any("/" in entry and not _is_network(entry) for entry in policy.allowlist):
        return policy
    try:
        path = _normalized_path(urlsplit(url).path or "/")
    except ValueError:
        path = None
    entries = []
    for entry in policy.allowlist:
        if "/" not in entry or _is_network(entry):
            entries.append(entry)
            continue
        hostport, _, prefix = entry.strip().partition("/")
        if path is not None and path.startswith("/" + prefix):
            entries.append(hostport)
    return replace(policy, allowlist=tuple(entries))


def _is_network(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry.strip(), strict=False)
    except ValueError:
        return False
    return True


def check_addresses(host: str, port: int, addresses: list[str], policy: Policy) -> None:
    """Refuse if any address is internal and neither the policy nor its allow-list admits it."""
    if not addresses:
        raise OutboundBlocked(f"host {host!r} resolved to no address", permanent=False)
    if policy.trusted:
        return
    internal = [a for a in addresses if is_internal(a)]
    if internal and not _allowed(host, port, addresses, policy.allowlist):
        raise OutboundBlocked(
            f"outbound request to {host} ({', '.join(internal)}) refused: private or loopback address "
            "not in STEADYFLOW_HTTP_ALLOWLIST"
        )


def resolve_checked(host: str, port: int, policy: Policy) -> list[str]:
    """Resolve `host` once and check every address: the addresses to connect to, and only those."""
    literal = parse_address(host)
    addresses = [str(literal)] if literal is not None else policy.resolve(host, port)
    check_addresses(host, port, addresses, policy)
    return addresses


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL, or OutboundBlocked naming what is wrong with it."""
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
    return parts.scheme, host, explicit_port or (443 if parts.scheme == "https" else 80)


def check_url(url: str, allowlist: Iterable[str], resolve: Resolver = system_resolver) -> None:
    """A pre-flight check (fail before building a request). Not enough on its own: the connection
    must use the checked addresses, which is what the outbound client does."""
    _, host, port = split_url(url)
    resolve_checked(host, port, Policy(allowlist=tuple(allowlist), resolve=resolve))
