"""The signature scheme of incoming and outgoing webhooks (Stripe's):

    Steadyflow-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>[,v1=...]

Several v1 values may be sent (a sender rotating its secret signs with both). A request is accepted
when its timestamp is within the replay window of now and any v1 matches any valid secret,
compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

HEADER = "Steadyflow-Signature"
DELIVERY_HEADER = "Steadyflow-Delivery"


class SignatureRejected(Exception):
    """Why a signature does not verify; `status` 401 (missing/bad signature) or 403 (stale timestamp)."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def header_value(secrets: Iterable[str], timestamp: int, body: bytes) -> str:
    return ",".join([f"t={timestamp}"] + [f"v1={signature(s, timestamp, body)}" for s in secrets])


def parse(header: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            if not value.isdigit() or len(value) > 12:
                raise SignatureRejected("the signature's timestamp t= is not a unix time in seconds")
            timestamp = int(value)
        elif key == "v1" and value:
            candidates.append(value.strip().lower())
    if timestamp is None:
        raise SignatureRejected("the signature header has no timestamp (t=)")
    if not candidates:
        raise SignatureRejected("the signature header has no v1= signature")
    return timestamp, candidates[:8]


def verify(header: str | None, body: bytes, secrets: list[str], *, now: float, window_s: float) -> int:
    """The verified timestamp, or SignatureRejected."""
    if not header:
        raise SignatureRejected(f"missing {HEADER} header")
    timestamp, candidates = parse(header)
    if abs(now - timestamp) > window_s:
        raise SignatureRejected(f"timestamp outside the replay window of {window_s:g} s", 403)
    expected = [signature(secret, timestamp, body) for secret in secrets]
    # Every pair is compared (no early exit), each in constant time.
    matched = False
    for candidate in candidates:
        for want in expected:
            matched |= hmac.compare_digest(candidate.encode(), want.encode())
    if not matched:
        raise SignatureRejected("signature does not match")
    return timestamp
