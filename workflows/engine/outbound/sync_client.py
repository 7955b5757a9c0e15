"""The blocking outbound client: httpx builds the request, httpcore sends it over connections that our
network backend opens, so the SSRF check sits exactly where the socket is made.

`GuardedBackend.connect_tcp` is handed the URL's host; it resolves it once (ssrf.resolve_checked),
refuses internal addresses, and connects to one of the checked IP addresses. httpcore still takes
TLS SNI, certificate verification and the Host header from the URL, so the original host name is
what the server sees and what its certificate must name. Every socket operation gets the time left
until the request's total deadline, not a fresh per-read timeout.
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Iterable, Mapping
from typing import Any

import certifi
import httpcore
import httpx

from workflows.engine import ssrf
from workflows.engine.errors import ConfigError
from workflows.engine.outbound.body import BodyReader
from workflows.engine.outbound.types import (
    ACCEPT_ENCODING,
    MAX_BODY_BYTES,
    DeadlineExceeded,
    Reply,
    TransportFailed,
    clamp_timeout,
)

_CHUNK = 65_536
_FAILURES = (httpcore.NetworkError, httpcore.ProtocolError, httpcore.ProxyError, httpcore.UnsupportedProtocol)


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def budget(self, timeout: float | None) -> float:
        """The timeout for the next socket operation: what is left, never more than `timeout`."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(f"total deadline of {self.seconds:g} s passed")
        return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, deadline: Deadline) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        budget = self._deadline.budget(timeout)
        try:
            return self._inner.read(max_bytes, budget)
        except httpcore.TimeoutException:
            self._raise_if_deadline(budget, timeout)
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        budget = self._deadline.budget(timeout)
        try:
            self._inner.write(buffer, budget)
        except httpcore.TimeoutException:
            self._raise_if_deadline(budget, timeout)
            raise

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        budget = self._deadline.budget(timeout)
        try:
            inner = self._inner.start_tls(ssl_context, server_hostname, budget)
        except httpcore.TimeoutException:
            self._raise_if_deadline(budget, timeout)
            raise
        return DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def _raise_if_deadline(self, budget: float, timeout: float | None) -> None:
        # The socket timed out on the time left to the deadline, not on the operation's own timeout.
        if timeout is None or budget < timeout:
            raise DeadlineExceeded(f"total deadline of {self._deadline.seconds:g} s passed") from None


class GuardedBackend(httpcore.NetworkBackend):
    """Connects only to addresses the policy admits, resolved once per connection."""

    def __init__(self, policy: ssrf.Policy, deadline: Deadline) -> None:
        self._policy = policy
        self._deadline = deadline
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        addresses = ssrf.resolve_checked(host, port, self._policy)
        failure: Exception | None = None
        for address in addresses:  # each one was checked; try them in the resolver's order
            budget = self._deadline.budget(timeout)
            try:
                stream = self._inner.connect_tcp(address, port, budget, local_address, socket_options)
            except httpcore.ConnectTimeout:
                if budget < (timeout or float("inf")):
                    raise DeadlineExceeded(f"total deadline of {self._deadline.seconds:g} s passed") from None
                raise
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            return DeadlineStream(stream, self._deadline)
        assert failure is not None
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not an outbound target")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """certifi's CA bundle, as httpx uses by default; built once (loading it costs milliseconds) and
    shared, which is safe for client-side contexts that are not modified afterwards."""
    return ssl.create_default_context(cafile=certifi.where())


def build_request(method: str, url: str, *, headers: Mapping[str, str] | None = None, params: Any = None,
                  json: Any = None, content: str | bytes | None = None) -> httpx.Request:
    """The request as bytes on the wire will carry it (query string, JSON body, Host, Content-Length)."""
    ssrf.split_url(url)  # scheme and host first, with the guard's own messages
    try:
        request = httpx.Request(method, url, headers=dict(headers or {}), params=params, json=json,
                                content=content)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:  # a header that is not latin-1, a bad URL...
        raise ConfigError(f"cannot build the request: {type(exc).__name__}: {exc}") from None
    request.headers["Accept-Encoding"] = ACCEPT_ENCODING  # only what BodyReader decodes under its cap
    request.headers.setdefault("Accept", "*/*")
    request.headers.setdefault("User-Agent", "steadyflow")
    request.read()
    return request


def request(method: str, url: str, *, policy: ssrf.Policy, timeout_s: float,
            headers: Mapping[str, str] | None = None, params: Any = None, json: Any = None,
            content: str | bytes | None = None, max_bytes: int = MAX_BODY_BYTES,
            ssl_context: ssl.SSLContext | None = None) -> Reply:
    """Send one request (redirects are not followed: a 3xx is the reply) and read its body under
    `max_bytes`, all within `timeout_s` in total. Raises OutboundBlocked, DeadlineExceeded,
    ResponseTooLarge, UndecodableBody or TransportFailed."""
    deadline = Deadline(clamp_timeout(timeout_s))
    built = build_request(method, url, headers=headers, params=params, json=json, content=content)
    # Path-prefix allow-list entries, judged on the URL as it is sent.
    policy = ssrf.policy_for_url(policy, str(built.url))
    target = httpcore.URL(scheme=built.url.raw_scheme, host=built.url.raw_host, port=built.url.port,
                          target=built.url.raw_path)
    seconds = deadline.seconds
    extensions = {"timeout": {"connect": seconds, "read": seconds, "write": seconds, "pool": seconds}}
    try:
        with httpcore.ConnectionPool(ssl_context=ssl_context or default_ssl_context(), max_connections=1,
                                     retries=0, network_backend=GuardedBackend(policy, deadline)) as pool:
            with pool.stream(built.method, target, headers=built.headers.raw, content=built.content,
                             extensions=extensions) as response:
                reader = BodyReader(_header(response.headers, b"content-encoding"), max_bytes)
                for chunk in response.iter_stream():
                    reader.feed(chunk)
                body = reader.result()
                peer = response.extensions["network_stream"].get_extra_info("server_addr")
    except httpcore.TimeoutException:
        # Each operation's own timeout is the whole deadline, so any timeout means the deadline.
        raise DeadlineExceeded(f"total deadline of {seconds:g} s passed") from None
    except _FAILURES as exc:
        raise TransportFailed(f"{type(exc).__name__}: {exc}", kind=type(exc).__name__) from None
    headers_out = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers]
    return Reply(status=response.status, headers=headers_out, body=body,
                 remote_address=str(peer[0]) if peer else "")


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    values = [v.decode("latin-1") for k, v in headers if k.lower() == name]
    return ", ".join(values) if values else None
