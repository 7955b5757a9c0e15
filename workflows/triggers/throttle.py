"""The webhook endpoint's limit on rejected requests, per client address and per hook.

Every request the endpoint refuses before a signature has authenticated it (unknown hook, bad, missing or
expired signature, oversized body, wrong method) counts one for its client address and, when the hook
exists, one for the hook, in fixed windows in Redis (workflows/adapters/ratelimit.py). While either count is at its
limit the endpoint answers 429 with Retry-After at once: no database lookup, no HMAC. Accepted deliveries
count nothing, and a sender's own mistakes after a valid signature (bad JSON, a disabled hook) are its
rejections log's business, not the limit's. The per-hook limit (higher) bounds what many addresses
together can make the endpoint do; an address that delivered validly to the hook lately is let past it
(`known_sender`), so a flood at one hook does not lock out its real sender.

The client address is REMOTE_ADDR, as for login throttling (dashboard/security/login_throttle.py): behind a proxy,
run daphne with --proxy-headers so it is the client's. X-Forwarded-For is never read here.
"""

from __future__ import annotations

import logging

from django.conf import settings

from workflows.adapters import ratelimit

log = logging.getLogger("steadyflow.triggers")


def windows() -> tuple[ratelimit.Window, ratelimit.Window]:
    """(per address, per hook): STEADYFLOW_WEBHOOK_REJECT_LIMIT and STEADYFLOW_WEBHOOK_HOOK_REJECT_LIMIT
    rejections per STEADYFLOW_WEBHOOK_REJECT_WINDOW_S seconds (0: no limit)."""
    conf = settings.STEADYFLOW
    window_s = int(conf["WEBHOOK_REJECT_WINDOW_S"])
    return (ratelimit.Window("webhook-reject-addr", int(conf["WEBHOOK_REJECT_LIMIT"]), window_s),
            ratelimit.Window("webhook-reject-hook", int(conf["WEBHOOK_HOOK_REJECT_LIMIT"]), window_s))


def refusal(address: str, hook_id: str, now: float) -> tuple[int, str] | None:
    """(Retry-After seconds, message) when this address or this hook is over its limit, else None."""
    by_address, by_hook = windows()
    if address and ratelimit.over(by_address, address, now):
        return by_address.retry_after(now), (
            f"too many rejected webhook requests from your address (at most {by_address.limit} per "
            f"{by_address.window_s} s): retry in {by_address.retry_after(now)} s")
    if ratelimit.over(by_hook, hook_id, now) and not known_sender(address, hook_id):
        return by_hook.retry_after(now), (
            f"too many rejected requests for this webhook (at most {by_hook.limit} per {by_hook.window_s} s): "
            f"retry in {by_hook.retry_after(now)} s")
    return None


# An address that delivered validly to a hook is let past that hook's limit (not its own address's)
# for this long after its last valid delivery: a flood of unsigned requests from elsewhere must not lock
# the hook for the sender it exists for. A stranger still gets the 429 at no cost.
SENDER_MEMORY_S = 7 * 24 * 3600


def _sender_key(address: str, hook_id: str) -> str:
    return f"steadyflow:webhook-sender:{hook_id}:{address}"


def remember_sender(address: str, hook_id: str) -> None:
    """`address` just delivered a correctly signed request to `hook_id`."""
    if not address:
        return
    try:
        ratelimit.connection().set(_sender_key(address, hook_id), b"1", ex=SENDER_MEMORY_S)
    except Exception as exc:  # noqa: BLE001 - Redis down: the limits fail open anyway
        log.warning("webhook sender not remembered: Redis unavailable (%s)", type(exc).__name__)


def known_sender(address: str, hook_id: str) -> bool:
    if not address:
        return False
    try:
        return bool(ratelimit.connection().exists(_sender_key(address, hook_id)))
    except Exception:  # noqa: BLE001 - Redis down: over() failed open already
        return False


def count(address: str, hook_id: str | None, now: float) -> None:
    """Count one rejected request (`hook_id` None when no such hook exists); log, once per window, that a
    limit was reached (the address or hook, never headers or body)."""
    by_address, by_hook = windows()
    for window, subject in ((by_address, address), (by_hook, hook_id)):
        if not subject:
            continue
        if ratelimit.hit(window, subject, now) == window.limit:
            log.warning("webhook rejections limit reached: %s %s refused for %d s (%d per %d s)",
                        "address" if window is by_address else "hook", subject, window.retry_after(now),
                        window.limit, window.window_s)
