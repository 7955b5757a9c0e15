"""Retry policy: exponential backoff with full jitter, capped."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 1
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    jitter: bool = True

    @classmethod
    def from_node(cls, retry: dict[str, Any], default_attempts: int) -> RetryPolicy:
        return cls(
            max_attempts=int(retry.get("max_attempts", default_attempts)),
            backoff_s=float(retry.get("backoff_s", 1.0)),
            max_backoff_s=float(retry.get("max_backoff_s", 60.0)),
            jitter=bool(retry.get("jitter", True)),
        )

    def should_retry(self, attempt: int, permanent: bool) -> bool:
        return not permanent and attempt < self.max_attempts

    def delay(self, attempt: int, rand: random.Random | None = None) -> float:
        """Delay before attempt `attempt + 1`. With jitter: uniform in [base/2, base]."""
        base = min(self.max_backoff_s, self.backoff_s * 2.0 ** max(0, attempt - 1))
        if not self.jitter:
            return base
        rng = rand or random
        return base / 2 + rng.random() * base / 2
