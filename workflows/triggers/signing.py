"""The signature scheme of incoming and outgoing webhooks (Stripe's):

    Steadyflow-Signature: t=<unix seconds>,v2=<hex HMAC-SHA256(secret, "<t>.<delivery id>." + body)>[,v2=...]

The delivery id (the Steadyflow-Delivery header) is signed too: the receiver starts one run per
delivery id, so a captured request replayed inside the window under a new id would otherwise start a
new run. The earlier `v1=` (over "<t>." + body only) is refused, naming the scheme.

Several v2 values may be sent (a sender rotating its secret signs with both). A request is accepted
when its timestamp is within the replay window of now and any v2 matches any valid secret,
compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

HEADER = "Steadyflow-Signature"
DELIVERY_HEADER = "Steadyflow-Delivery"


class SignatureRejected(Exception):
    """Why a signature does not verify; `status` 401 (missing/bad signature) or 403 (stale timestamp)."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


SCHEME = "v2"
_TIMESTAMP = re.compile(r"[0-9]{1,12}")  # ASCII digits only: str.isdigit() takes "²", which int() refuses


def signature(secret: str, timestamp: int, body: bytes, delivery_id: str) -> str:
    signed = f"{timestamp}.{delivery_id}.".encode() + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def header_value(secrets: Iterable[str], timestamp: int, body: bytes, delivery_id: str) -> str:
    return ",".join([f"t={timestamp}"] + [f"{SCHEME}={signature(s, timestamp, body, delivery_id)}" for s in secrets])


def parse(header: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    candidates: list[str] = []
    legacy = False
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            if not _TIMESTAMP.fullmatch(value):
                raise SignatureRejected("the signature's timestamp t= is not a unix time in seconds")
            timestamp = int(value)
        elif key == SCHEME and value:
            candidates.append(value.strip().lower())
        elif key == "v1":
            legacy = True
    if timestamp is None:
        raise SignatureRejected("the signature header has no timestamp (t=)")
    if not candidates and legacy:
        raise SignatureRejected(f"v1= signatures (over the body alone) are not accepted: sign \"<t>.<delivery id>.\" "
                                f"+ body as {SCHEME}= (the delivery id is the {DELIVERY_HEADER} header)")
    if not candidates:
        raise SignatureRejected(f"the signature header has no {SCHEME}= signature")
    return timestamp, candidates[:8]


def verify(header: str | None, body: bytes, secrets: list[str], *, now: float, window_s: float,
           delivery_id: str) -> int:
    """The verified timestamp, or SignatureRejected."""
    if not header:
        raise SignatureRejected(f"missing {HEADER} header")
    timestamp, candidates = parse(header)
    if abs(now - timestamp) > window_s:
        raise SignatureRejected(f"timestamp outside the replay window of {window_s:g} s", 403)
    expected = [signature(secret, timestamp, body, delivery_id) for secret in secrets]
    # Every pair is compared (no early exit), each in constant time.
    matched = False
    for candidate in candidates:
        for want in expected:
            matched |= hmac.compare_digest(candidate.encode(), want.encode())
    if not matched:
        raise SignatureRejected("signature does not match")
    return timestamp
