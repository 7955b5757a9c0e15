"""What the outbound client returns and raises, and the limits it applies to every request."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from workflows.engine import limits
from workflows.engine.errors import ConfigError, PermanentStepError, StepError, StepTimeout

MAX_BODY_BYTES = 5_000_000  # a response body, both as received (compressed) and once decoded
MAX_TIMEOUT_S = float(limits.MAX_STEP_TIMEOUT_S)  # the same bound validation puts on a node's timeout_s
ACCEPT_ENCODING = "gzip, deflate"  # what body.BodyReader can decode under its cap


class DeadlineExceeded(StepTimeout):
    """The request's total deadline passed (connect, send and the whole body together)."""


class ResponseTooLarge(PermanentStepError):
    code = "payload_too_large"


class UndecodableBody(PermanentStepError):
    """The body's Content-Encoding is not one the client can decode under its cap, or is corrupt."""

    code = "undecodable_body"


class TransportFailed(StepError):
    """The connection failed or broke (refused, reset, TLS, protocol error): transient."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind  # the underlying exception's class name, e.g. "ConnectError"


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes  # decoded (Content-Encoding undone), at most the request's max_bytes
    # The IP address the connection went to (the one that was checked), when the client can tell: the
    # blocking client always can; aiohttp may have released the connection before the reply is read.
    remote_address: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    @property
    def text(self) -> str:
        return self.body.decode(_charset(self.header("content-type")), errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


def _charset(content_type: str | None) -> str:
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip('"').lower()
            try:
                "".encode(charset)
            except LookupError:
                break
            return charset
    return "utf-8"


def clamp_timeout(timeout_s: float) -> float:
    """The total deadline in seconds: positive, finite and at most MAX_TIMEOUT_S whatever was asked
    (validation bounds node timeouts already; this holds for every caller)."""
    if not isinstance(timeout_s, int | float) or math.isnan(timeout_s) or timeout_s <= 0:
        raise ConfigError(f"timeout must be a positive number of seconds, not {timeout_s!r}")
    return min(float(timeout_s), MAX_TIMEOUT_S)
