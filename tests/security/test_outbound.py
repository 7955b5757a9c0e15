"""The outbound client cannot be turned around: pinned resolution, byte caps on the wire and after
decompression, one total deadline, no redirects, TLS to the host name; and no other module makes
outbound connections. Servers are real sockets on loopback, run in threads of the test process."""

from __future__ import annotations

import ast
import asyncio
import functools
import gzip
import random
import socket
import ssl
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.engine.conftest import make_call
from workflows.engine import outbound, providers
from workflows.engine.errors import ConfigError, OutboundBlocked, PermanentStepError, ProviderError, StepTimeout
from workflows.engine.nodes import get_kind
from workflows.engine.nodes.base import EngineConfig

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = outbound.Policy(allowlist=("127.0.0.1/32",))
MB = 1_000_000

# --- A raw HTTP/1.1 server that counts what it sends ------------------------------------------------

Handler = Callable[["Conn"], None]


@dataclass
class Conn:
    sock: socket.socket
    request: bytes
    server: RawServer

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.server.bytes_sent += len(data)

    def head(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.send(("\r\n".join(lines) + "\r\n\r\n").encode())

    @property
    def host_header(self) -> str:
        for line in self.request.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"host":
                return value.strip().decode()
        return ""


@dataclass
class RawServer:
    host: str = "127.0.0.1"
    port: int = 0
    handler: Handler | None = None
    bytes_sent: int = 0
    connections: list[str] = field(default_factory=list)  # the request line of each request
    ssl_context: ssl.SSLContext | None = None

    def url(self, path: str, host: str | None = None) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{host or self.host}:{self.port}{path}"


@pytest.fixture
def serve() -> Iterator[Callable[..., RawServer]]:
    listeners: list[socket.socket] = []

    def start(handler: Handler, host: str = "127.0.0.1", port: int = 0,
              ssl_context: ssl.SSLContext | None = None) -> RawServer:
        server = RawServer(host=host, handler=handler, ssl_context=ssl_context)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(16)
        server.port = listener.getsockname()[1]
        listeners.append(listener)

        def one(sock: socket.socket) -> None:
            # A small send buffer: what the server managed to send is close to what the client read.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65_536)
            try:
                if ssl_context is not None:
                    sock = ssl_context.wrap_socket(sock, server_side=True)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = sock.recv(65_536)
                    if not chunk:
                        return
                    data += chunk
                server.connections.append(data.split(b"\r\n", 1)[0].decode())
                handler(Conn(sock, data, server))
            except (OSError, ssl.SSLError):
                pass  # the client hung up: that is what several tests provoke
            finally:
                sock.close()

        def accept() -> None:
            while True:
                try:
                    sock, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=one, args=(sock,), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return server

    yield start
    for listener in listeners:
        listener.close()


def ok(conn: Conn) -> None:
    conn.head(200, {"Content-Type": "application/json", "Content-Length": "12"})
    conn.send(b'{"ok": true}')


HTTP = get_kind("http")


def run_http(url: str, allow: tuple[str, ...] = ("127.0.0.1/32",), **config: Any) -> Any:
    return HTTP.run(make_call("http", {"url": url, **config}, engine=EngineConfig(http_allowlist=allow)))


# --- Pinned resolution ---------------------------------------------------------------------------

def test_dns_rebinding_connects_to_the_checked_address(serve: Callable[..., RawServer],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # "rebind.test" answers 127.0.0.1 (allow-listed: it stands for a public address) the first time,
    # then 127.0.0.2 (not allow-listed: the internal target). Only one lookup may decide.
    checked = serve(ok)
    internal = serve(ok, host="127.0.0.2", port=checked.port)
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"])

    def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.test":
            return real(next(answers, "127.0.0.2"), port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    result = run_http(f"http://rebind.test:{checked.port}/x")
    assert result.output == {"status": 200, "body": {"ok": True}}
    assert checked.connections == ["GET /x HTTP/1.1"]
    assert internal.connections == []


def test_the_connection_goes_to_the_address_that_was_checked(serve: Callable[..., RawServer]) -> None:
    server = serve(ok)
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return ["127.0.0.1"] if len(asked) == 1 else ["127.0.0.2"]

    policy = outbound.Policy(allowlist=("127.0.0.1/32",), resolve=resolve)
    reply = outbound.request("GET", server.url("/a", host="pinned.test"), policy=policy, timeout_s=5)
    assert reply.remote_address == "127.0.0.1"
    assert asked == [("pinned.test", server.port)]  # one lookup, and the Host header kept the name
    assert reply.json() == {"ok": True}


def test_a_name_resolving_inside_is_refused_before_connecting(serve: Callable[..., RawServer]) -> None:
    server = serve(ok)
    policy = outbound.Policy(allowlist=("127.0.0.1/32",), resolve=lambda host, port: ["127.0.0.2"])
    with pytest.raises(OutboundBlocked, match=r"inside\.test \(127\.0\.0\.2\) refused"):
        outbound.request("GET", server.url("/", host="inside.test"), policy=policy, timeout_s=5)
    assert server.connections == []


def test_the_async_client_is_pinned_too(serve: Callable[..., RawServer]) -> None:
    server = serve(ok)
    internal = serve(ok, host="127.0.0.2", port=server.port)
    answers = iter([["127.0.0.1"]])
    policy = outbound.Policy(allowlist=("127.0.0.1/32",), resolve=lambda host, port: next(answers, ["127.0.0.2"]))

    async def go() -> outbound.Reply:
        try:
            return await outbound.arequest("GET", server.url("/a", host="rebind.test"), policy=policy,
                                           timeout_s=5, pool="t")
        finally:
            await outbound.close_pools()

    assert asyncio.run(go()).json() == {"ok": True}
    assert server.connections == ["GET /a HTTP/1.1"]
    assert internal.connections == []
    with pytest.raises(OutboundBlocked):  # a name: refused by the connector's resolver
        asyncio.run(go())
    with pytest.raises(OutboundBlocked):  # an IP literal: aiohttp would not ask the resolver
        asyncio.run(outbound.arequest("GET", "http://127.0.0.2:9/", policy=LOOPBACK, timeout_s=5, pool="t"))
    assert internal.connections == []


# --- TLS keeps the host name -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def tls_server(serve: Callable[..., RawServer], ca: trustme.CA, name: str, seen_sni: list[str | None]) -> RawServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(context)
    context.sni_callback = lambda sock, server_name, ctx: seen_sni.append(server_name)  # type: ignore[assignment]

    def echo_host(conn: Conn) -> None:
        body = conn.host_header.encode()
        conn.head(200, {"Content-Length": str(len(body))})
        conn.send(body)

    return serve(echo_host, ssl_context=context)


def test_tls_uses_the_host_name_for_sni_certificate_and_host(serve: Callable[..., RawServer], ca: trustme.CA) -> None:
    sni: list[str | None] = []
    server = tls_server(serve, ca, "pinned.test", sni)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    policy = outbound.Policy(allowlist=("127.0.0.1/32",), resolve=lambda host, port: ["127.0.0.1"])
    reply = outbound.request("GET", server.url("/", host="pinned.test"), policy=policy, timeout_s=5,
                             ssl_context=client)
    assert (reply.status, reply.text, reply.remote_address) == (200, f"pinned.test:{server.port}", "127.0.0.1")

    async def go() -> outbound.Reply:
        try:
            return await outbound.arequest("GET", server.url("/", host="pinned.test"), policy=policy, timeout_s=5,
                                           pool="tls", ssl_context=client)
        finally:
            await outbound.close_pools()

    assert asyncio.run(go()).text == f"pinned.test:{server.port}"
    assert sni == ["pinned.test", "pinned.test"]


def test_a_certificate_for_another_name_is_refused(serve: Callable[..., RawServer], ca: trustme.CA) -> None:
    server = tls_server(serve, ca, "other.test", [])
    client = ssl.create_default_context()
    ca.configure_trust(client)
    policy = outbound.Policy(allowlist=("127.0.0.1/32",), resolve=lambda host, port: ["127.0.0.1"])
    with pytest.raises(outbound.TransportFailed, match="ConnectError") as info:
        outbound.request("GET", server.url("/", host="pinned.test"), policy=policy, timeout_s=5,
                         ssl_context=client)
    assert not info.value.permanent
    assert server.connections == []


# --- Byte caps -------------------------------------------------------------------------------------

def endless(conn: Conn) -> None:
    """Announces 1 GB and sends it until the client hangs up."""
    conn.head(200, {"Content-Type": "text/plain", "Content-Length": str(1000 * MB)})
    chunk = b"x" * 65_536
    while conn.server.bytes_sent < 1000 * MB:
        conn.send(chunk)


def test_a_body_over_the_cap_stops_being_read_near_the_cap(serve: Callable[..., RawServer]) -> None:
    server = serve(endless)
    tracemalloc.start()
    try:
        with pytest.raises(PermanentStepError, match="larger than 5000000 bytes"):
            run_http(server.url("/big"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # What left the server: the 5 MB cap plus what the two sockets' buffers held, not the gigabyte.
    assert server.bytes_sent < 20 * MB
    assert peak < 20 * MB


@functools.cache
def bomb_body() -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(MB)
    return b"".join(compressor.compress(zeros) for _ in range(200)) + compressor.flush()  # 200 MB inflated


def gzip_bomb(conn: Conn) -> None:
    body = bomb_body()
    conn.head(200, {"Content-Type": "text/plain", "Content-Encoding": "gzip", "Content-Length": str(len(body))})
    conn.send(body)


def test_a_gzip_bomb_is_cut_at_the_cap_once_decompressed(serve: Callable[..., RawServer]) -> None:
    assert len(bomb_body()) < MB
    server = serve(gzip_bomb)
    tracemalloc.start()
    try:
        with pytest.raises(PermanentStepError, match="larger than 5000000 bytes once decompressed"):
            run_http(server.url("/bomb"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * MB  # never more than the cap (plus a chunk) inflated at once


def test_gzip_and_deflate_within_the_cap_are_decoded(serve: Callable[..., RawServer]) -> None:
    payload = b'{"n": ' + b"1" * 1000 + b"}"

    def coded(conn: Conn) -> None:
        body, coding = (gzip.compress(payload), "gzip") if "/gz" in conn.request.split(b"\r\n")[0].decode() else (
            zlib.compress(payload), "deflate")
        conn.head(200, {"Content-Encoding": coding, "Content-Length": str(len(body))})
        conn.send(body)

    server = serve(coded)
    assert outbound.request("GET", server.url("/gz"), policy=LOOPBACK, timeout_s=5).body == payload
    assert outbound.request("GET", server.url("/deflate"), policy=LOOPBACK, timeout_s=5).body == payload
    # The request says what the client can decode under its cap; nothing else.
    assert outbound.request("GET", server.url("/gz"), policy=LOOPBACK, timeout_s=5,
                            headers={"Accept-Encoding": "br"}).body == payload


def test_the_cap_counts_wire_bytes_for_a_compressed_body(serve: Callable[..., RawServer]) -> None:
    body = gzip.compress(random.Random(7).randbytes(300_000))  # does not shrink: 300 kB on the wire

    def send(conn: Conn) -> None:
        conn.head(200, {"Content-Encoding": "gzip", "Content-Length": str(len(body))})
        conn.send(body)

    server = serve(send)
    with pytest.raises(outbound.ResponseTooLarge, match="larger than 200000 bytes$"):
        outbound.request("GET", server.url("/"), policy=LOOPBACK, timeout_s=5, max_bytes=200_000)


def test_an_undecodable_encoding_is_refused(serve: Callable[..., RawServer]) -> None:
    def brotli(conn: Conn) -> None:
        conn.head(200, {"Content-Encoding": "br", "Content-Length": "4"})
        conn.send(b"\x00\x01\x02\x03")

    server = serve(brotli)
    with pytest.raises(PermanentStepError, match="unsupported Content-Encoding 'br'"):
        run_http(server.url("/"))


def test_the_async_client_caps_bodies_too(serve: Callable[..., RawServer]) -> None:
    big, bomb = serve(endless), serve(gzip_bomb)

    async def go(url: str) -> outbound.Reply:
        try:
            return await outbound.arequest("GET", url, policy=LOOPBACK, timeout_s=30, pool="caps")
        finally:
            await outbound.close_pools()

    with pytest.raises(outbound.ResponseTooLarge, match="larger than 5000000 bytes$"):
        asyncio.run(go(big.url("/")))
    assert big.bytes_sent < 20 * MB
    with pytest.raises(outbound.ResponseTooLarge, match="once decompressed"):
        asyncio.run(go(bomb.url("/")))


# --- One total deadline ----------------------------------------------------------------------------

def drip(conn: Conn) -> None:
    """40 bytes, one every 0.1 s: no single read waits long, the whole takes 4 s."""
    conn.head(200, {"Content-Type": "text/plain", "Content-Length": "40"})
    for _ in range(40):
        conn.send(b"x")
        time.sleep(0.1)


def test_a_slow_drip_is_cut_by_the_total_deadline(serve: Callable[..., RawServer]) -> None:
    server = serve(drip)
    with pytest.raises(StepTimeout, match="timed out after 1 s"):
        run_http(server.url("/drip"), timeout_s=1)
    with pytest.raises(outbound.DeadlineExceeded, match="total deadline of 1 s passed"):
        outbound.request("GET", server.url("/drip"), policy=LOOPBACK, timeout_s=1)


def test_the_async_client_has_a_total_deadline(serve: Callable[..., RawServer]) -> None:
    server = serve(drip)

    async def go() -> outbound.Reply:
        try:
            return await outbound.arequest("GET", server.url("/drip"), policy=LOOPBACK, timeout_s=1, pool="d")
        finally:
            await outbound.close_pools()

    with pytest.raises(outbound.DeadlineExceeded, match="total deadline of 1 s passed"):
        asyncio.run(go())


@pytest.mark.parametrize("asked", [0, -1, float("nan")])
def test_a_timeout_that_is_not_positive_is_refused(asked: float) -> None:
    with pytest.raises(ConfigError, match="timeout must be a positive number"):
        outbound.request("GET", "http://127.0.0.1:9/", policy=LOOPBACK, timeout_s=asked)


def test_a_huge_timeout_is_clamped_to_a_day() -> None:
    assert outbound.clamp_timeout(1e300) == outbound.MAX_TIMEOUT_S == 86_400
    assert outbound.clamp_timeout(float("inf")) == 86_400
    assert outbound.clamp_timeout(2.5) == 2.5


# --- Redirects -------------------------------------------------------------------------------------

def test_a_redirect_to_an_internal_address_is_not_followed(serve: Callable[..., RawServer]) -> None:
    internal = serve(ok, host="127.0.0.2")

    def redirect(conn: Conn) -> None:
        conn.head(302, {"Location": internal.url("/secret"), "Content-Length": "0"})

    server = serve(redirect)
    assert run_http(server.url("/go")).output == {"status": 302, "body": ""}
    assert internal.connections == []


def test_an_llm_provider_redirect_is_not_followed(serve: Callable[..., RawServer]) -> None:
    internal = serve(ok, host="127.0.0.2")

    def redirect(conn: Conn) -> None:
        conn.head(307, {"Location": internal.url("/v1/chat/completions"), "Content-Length": "0"})

    server = serve(redirect)

    async def go() -> Any:
        try:
            return await providers.openai_chat(base_url=server.url("/v1"), api_key="", model="m", messages=[],
                                                timeout_s=5, limit=2, policy=outbound.Policy(trusted=True))
        finally:
            await providers.close_sessions()

    with pytest.raises(ProviderError, match="not JSON"):
        asyncio.run(go())
    assert internal.connections == []


def test_an_untrusted_provider_base_url_inside_is_refused(serve: Callable[..., RawServer]) -> None:
    server = serve(ok)

    async def go() -> Any:
        try:
            return await providers.openai_chat(base_url=server.url("/v1"), api_key="", model="m", messages=[],
                                                timeout_s=5, limit=2, policy=outbound.Policy())
        finally:
            await providers.close_sessions()

    with pytest.raises(OutboundBlocked):
        asyncio.run(go())
    assert server.connections == []


# --- No other way out ------------------------------------------------------------------------------

# Modules that open connections or speak HTTP, and socket/asyncio calls that do.
_CLIENT_MODULES = ("httpx", "httpcore", "aiohttp", "requests", "urllib3", "urllib.request", "http.client",
                   "pycurl", "websockets", "smtplib", "ftplib", "telnetlib", "xmlrpc.client")
_CONNECTING_CALLS = {"create_connection", "open_connection", "urlopen", "getaddrinfo", "socketpair",
                     "create_datagram_endpoint", "sock_connect"}
_OUTBOUND = ROOT / "workflows" / "engine" / "outbound"
_RESOLVER = ROOT / "workflows" / "engine" / "ssrf.py"  # the one getaddrinfo: the guard's resolver


def _offences(source: str, path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if any(name == m or name.startswith(m + ".") for m in _CLIENT_MODULES) or name in (
                    "socket.socket", "socket.create_connection", "socket.getaddrinfo"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
        if isinstance(node, ast.Attribute):
            is_socket = isinstance(node.value, ast.Name) and node.value.id == "socket" and node.attr == "socket"
            if (node.attr in _CONNECTING_CALLS or is_socket) and not (
                    path == _RESOLVER and node.attr == "getaddrinfo"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} uses .{node.attr}")
    return found


def test_every_outbound_call_goes_through_the_guarded_client() -> None:
    offences: list[str] = []
    files = [p for package in ("workflows", "dashboard") for p in (ROOT / package).rglob("*.py")
             if _OUTBOUND not in p.parents]
    assert len(files) > 50  # the scan saw the code base
    for path in files:
        offences += _offences(path.read_text(), path)
    assert offences == []


def test_the_call_site_scan_catches_a_bypass() -> None:
    source = ("import httpx\nfrom aiohttp import ClientSession\nimport urllib.request as u\nimport socket\n"
              "socket.create_connection(('a', 1))\nasyncio.open_connection('a', 1)\nsocket.getaddrinfo('a', 1)\n")
    found = [line.split(" ", 1)[1] for line in _offences(source, ROOT / "workflows" / "engine" / "nodes" / "x.py")]
    assert found == ["imports httpx", "imports aiohttp", "imports aiohttp.ClientSession", "imports urllib.request",
                     "uses .create_connection", "uses .open_connection", "uses .getaddrinfo"]
