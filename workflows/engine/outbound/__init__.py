"""The one way Steadyflow makes outbound HTTP requests (http nodes, LLM providers, anything else).

Every request: the host is resolved once and every address checked (workflows.engine.ssrf), the
connection goes to a checked address (pinned; SNI, certificate and Host keep the host name),
redirects are not followed, the body is streamed under a byte cap counted both as received and
once decompressed, and one total deadline (clamped to MAX_TIMEOUT_S) covers connect, send and the
whole body. tests/security/test_outbound.py fails if any other module opens HTTP connections.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from workflows.engine.outbound.sync_client import request
from workflows.engine.outbound.types import (
    MAX_BODY_BYTES,
    MAX_TIMEOUT_S,
    DeadlineExceeded,
    Reply,
    ResponseTooLarge,
    TransportFailed,
    UndecodableBody,
    clamp_timeout,
)
from workflows.engine.ssrf import Policy

T = TypeVar("T")

# The asyncio client (async_client) is loaded on first use: importing aiohttp costs ~0.3 s, and every process
# imports this package (node modules register at start-up) while only the AI worker and LLM calls need it.


async def arequest(method: str, url: str, *, policy: Policy, timeout_s: float, pool: str, limit: int = 100,
                   headers: Mapping[str, str] | None = None, json: Any = None, max_bytes: int = MAX_BODY_BYTES,
                   ssl_context: Any = True, on_chunk: Callable[[bytes], None] | None = None) -> Reply:
    """async_client.request: the asyncio twin of `request`."""
    from workflows.engine.outbound import async_client

    return await async_client.request(method, url, policy=policy, timeout_s=timeout_s, pool=pool, limit=limit,
                                      headers=headers, json=json, max_bytes=max_bytes, ssl_context=ssl_context,
                                      on_chunk=on_chunk)


async def close_pools() -> None:
    """async_client.close_pools: close this event loop's sessions."""
    from workflows.engine.outbound import async_client

    await async_client.close_pools()


def run_closing(main: Coroutine[Any, Any, T]) -> T:
    """async_client.run_closing: asyncio.run that closes the sessions the loop opened."""
    from workflows.engine.outbound import async_client

    return async_client.run_closing(main)


__all__ = [
    "MAX_BODY_BYTES", "MAX_TIMEOUT_S", "DeadlineExceeded", "Policy", "Reply", "ResponseTooLarge",
    "TransportFailed", "UndecodableBody", "arequest", "clamp_timeout", "close_pools", "request", "run_closing",
]
