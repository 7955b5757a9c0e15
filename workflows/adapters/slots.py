"""Bounded concurrency across processes, in Redis (the engine's Slots port: engine/nodes/base.py): a
slot is a member of a sorted set scored by when it lapses, so a holder that dies frees its slot at that
time. Acquiring (drop lapsed slots, count, add) is one Lua script, atomic against every other worker.
With Redis unreachable the call goes ahead unbounded: a limit protects the server, it is not a
permission (said once in the log).
"""

from __future__ import annotations

import logging
import time
import uuid

from workflows.adapters.ratelimit import connection

log = logging.getLogger("steadyflow.slots")

# KEYS[1]: the slots; ARGV: now, limit, lapse time, token. Returns 1 when the token took a slot.
ACQUIRE_SCRIPT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[3] - ARGV[1]) + 1)
return 1
"""
PREFIX = "steadyflow:slots:"


class RedisSlots:
    def acquire(self, key: str, limit: int, hold_s: float) -> str | None:
        token = uuid.uuid4().hex
        now = time.time()
        try:
            taken = connection().register_script(ACQUIRE_SCRIPT)(
                keys=[PREFIX + key], args=[now, limit, now + hold_s, token])
        except Exception as exc:  # noqa: BLE001 - Redis away: unbounded rather than stopped
            log.warning("slots for %s not counted: Redis unavailable (%s)", key, type(exc).__name__)
            return token
        return token if int(taken) == 1 else None

    def release(self, key: str, token: str) -> None:
        try:
            connection().zrem(PREFIX + key, token)
        except Exception as exc:  # noqa: BLE001 - the slot lapses on its own
            log.debug("slot of %s not released: %s", key, exc)
