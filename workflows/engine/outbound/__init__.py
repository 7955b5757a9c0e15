"""The one way Steadyflow makes outbound HTTP requests (http nodes, LLM providers, anything else).

Every request: the host is resolved once and every address checked (workflows.engine.ssrf), the
connection goes to a checked address (pinned; SNI, certificate and Host keep the host name),
redirects are not followed, the body is streamed under a byte cap counted both as received and
once decompressed, and one total deadline (clamped to MAX_TIMEOUT_S) covers connect, send and the
whole body. tests/security/test_outbound.py fails if any other module opens HTTP connections.
"""

from workflows.engine.outbound.async_client import close_pools, run_closing
from workflows.engine.outbound.async_client import request as arequest
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

__all__ = [
    "MAX_BODY_BYTES", "MAX_TIMEOUT_S", "DeadlineExceeded", "Policy", "Reply", "ResponseTooLarge",
    "TransportFailed", "UndecodableBody", "arequest", "clamp_timeout", "close_pools", "request", "run_closing",
]
