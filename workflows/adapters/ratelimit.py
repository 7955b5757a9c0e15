"""Fixed-window counters in Redis, shared by every web process: the v1 API's limit per token
(dashboard/security/tokens.py) and the webhook endpoint's limit on rejected requests (workflows/triggers/throttle.py).

A window is `window_s` seconds of the clock (slot = now // window_s). Its count for one subject lives
under `steadyflow:<name>:<subject>:<slot>` and expires with the window, so a new window starts at 0.
Counting is one Lua script (INCR, and EXPIRE on the first hit: atomic, so a key never outlives its window
even when a client dies between the two). With Redis unreachable nothing is counted and nothing is
refused: a limit protects capacity, it is not a permission (the callers log it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("steadyflow.ratelimit")

# KEYS[1]: the window's counter; ARGV[1]: its time to live (s). Returns the count after this hit.
HIT_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return count
"""


@dataclass(frozen=True)
class Window:
    """`limit` per `window_s` seconds for each subject counted under `name` (limit 0: no limit)."""

    name: str
    limit: int
    window_s: int

    def key(self, subject: str, now: float) -> str:
        return f"steadyflow:{self.name}:{subject}:{int(now // self.window_s)}"

    def retry_after(self, now: float) -> int:
        """Whole seconds until the current window ends (at least 1): a Retry-After."""
        end = (int(now // self.window_s) + 1) * self.window_s
        return max(1, int(end - now + 0.999))


def connection() -> Any:
    import django_rq

    return django_rq.get_connection("default")


def hit(window: Window, subject: str, now: float) -> int | None:
    """Count one for `subject` in the current window: its count after this one, None when not counted
    (no limit configured, or Redis unreachable)."""
    if window.limit <= 0:
        return None
    try:
        conn = connection()
        return int(conn.register_script(HIT_SCRIPT)(keys=[window.key(subject, now)], args=[window.window_s + 1]))
    except Exception as exc:  # noqa: BLE001 - Redis down: fail open, say so
        log.warning("rate limit %s not counted: Redis unavailable (%s)", window.name, type(exc).__name__)
        return None


def over(window: Window, subject: str, now: float) -> bool:
    """Whether `subject` already has `limit` counted in the current window (read only, counts nothing)."""
    if window.limit <= 0:
        return False
    try:
        value = connection().get(window.key(subject, now))
    except Exception as exc:  # noqa: BLE001 - Redis down: fail open, say so
        log.warning("rate limit %s not checked: Redis unavailable (%s)", window.name, type(exc).__name__)
        return False
    return value is not None and int(value) >= window.limit
