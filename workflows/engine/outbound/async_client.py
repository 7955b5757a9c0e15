"""The asyncio outbound client (the AI worker's LLM calls): aiohttp, which keeps hundreds of calls in
flight on one event loop (see docs/STACK_NOTES.md), with the same guard as the blocking client.

The SSRF check sits in the connector's resolver: aiohttp connects to exactly the addresses
`GuardedResolver.resolve` returned (and caches those, already checked), while TLS SNI, certificate
verification and the Host header keep the URL's host name. aiohttp does not ask the resolver about
IP literals, so those are checked before the request. Bodies are read raw (auto-decompression off)
through the same capped BodyReader; the whole call, queueing for a connection included, runs under
one asyncio deadline.
"""

from __future__ import annotations

import asyncio
import socket
import weakref
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from workflows.engine import ssrf
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
T = TypeVar("T")


class GuardedResolver(AbstractResolver):
    def __init__(self, policy: ssrf.Policy) -> None:
        self._policy = policy

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        # getaddrinfo blocks: in a thread, as aiohttp's own default resolver does.
        addresses = await asyncio.to_thread(ssrf.resolve_checked, host, port, self._policy)
        return [ResolveResult(hostname=host, host=address, port=port,
                              family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                              proto=0, flags=socket.AI_NUMERICHOST | socket.AI_NUMERICSERV)
                for address in addresses]

    async def close(self) -> None:
        return None


# One session (connection pool) and one concurrency bound per event loop, pool name and policy.
_Pools = dict[tuple[str, ssrf.Policy], tuple[aiohttp.ClientSession, asyncio.Semaphore]]
_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pools] = weakref.WeakKeyDictionary()


def _pool_for(name: str, policy: ssrf.Policy, limit: int) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
    pools = _pools.setdefault(asyncio.get_running_loop(), {})
    entry = pools.get((name, policy))
    if entry is None or entry[0].closed:
        connector = aiohttp.TCPConnector(limit=limit, limit_per_host=limit, resolver=GuardedResolver(policy))
        # No aiohttp timeout (its default is 300 s in total): the caller's deadline is the only one.
        session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                        timeout=aiohttp.ClientTimeout(total=None), trust_env=False)
        entry = pools[(name, policy)] = (session, asyncio.Semaphore(limit))
    return entry


async def close_pools() -> None:
    """Close this event loop's sessions (before the loop ends)."""
    for session, _ in _pools.pop(asyncio.get_running_loop(), {}).values():
        await session.close()


def run_closing(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run for outbound calls made off the AI worker's loop (a sync worker's llm step, a node
    test, a plan): the sessions this short-lived loop opened are closed before it ends, whatever
    `main` returned or raised (an error, its deadline, a SIGALRM time limit: then asyncio.run cancels
    it and the `finally` still runs on the loop). An open session would keep its loop alive here
    (_pools holds both) and end as an "Unclosed client session" warning."""

    async def closing() -> T:
        try:
            return await main
        finally:
            await close_pools()

    return asyncio.run(closing())


async def request(method: str, url: str, *, policy: ssrf.Policy, timeout_s: float, pool: str, limit: int = 100,
                  headers: Mapping[str, str] | None = None, json: Any = None, max_bytes: int = MAX_BODY_BYTES,
                  ssl_context: Any = True, on_chunk: Callable[[bytes], None] | None = None) -> Reply:
    """The asyncio twin of sync_client.request (no redirects, capped body, total deadline). `pool`
    names the connection pool to share (e.g. a provider's base URL); at most `limit` requests of
    that pool are in flight at once, and waiting for a turn counts against the deadline.

    `on_chunk` streams a 2xx body: it is given each piece as it arrives, decoded, under the same
    byte cap and deadline (a streamed LLM reply, engine/llm_stream.py); the Reply still holds the
    whole body. An exception it raises ends the request."""
    seconds = clamp_timeout(timeout_s)
    ssrf.split_url(url)
    target = URL(url)
    # Path-prefix allow-list entries, judged on the URL as it is sent.
    policy = ssrf.policy_for_url(policy, str(target))
    literal = ssrf.parse_address(target.raw_host or "")
    if literal is not None:  # aiohttp connects to an IP literal without asking the resolver
        ssrf.resolve_checked(str(literal), target.port or 0, policy)
    session, bound = _pool_for(pool, policy, limit)
    sent = {**dict(headers or {}), "Accept-Encoding": ACCEPT_ENCODING}
    try:
        async with asyncio.timeout(seconds):
            async with bound, session.request(method, target, headers=sent, json=json, allow_redirects=False,
                                              ssl=ssl_context) as response:
                peer = response.connection.transport.get_extra_info("peername") if (
                    response.connection and response.connection.transport) else None
                reader = BodyReader(response.headers.get("Content-Encoding"), max_bytes)
                sink = on_chunk if 200 <= response.status < 300 else None
                async for chunk in response.content.iter_chunked(_CHUNK):
                    data = reader.feed(chunk)
                    if sink is not None and data:
                        sink(data)
                body = reader.result()
                status = response.status
                headers_out = [(str(k), str(v)) for k, v in response.headers.items()]
    except TimeoutError:
        raise DeadlineExceeded(f"total deadline of {seconds:g} s passed") from None
    except aiohttp.ClientError as exc:
        raise TransportFailed(f"{type(exc).__name__}: {exc}", kind=type(exc).__name__) from None
    return Reply(status=status, headers=headers_out, body=body, remote_address=str(peer[0]) if peer else "")
