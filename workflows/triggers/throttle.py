"""The webhook endpoint's limit on rejected requests, per client address and per hook.

Every request the endpoint refuses before a signature has authenticated it (unknown hook, bad, missing or
expired signature, oversized body, wrong method) counts one for its client address and, when the hook
exists, one for the hook, in fixed windows in Redis (workflows/adapters/ratelimit.py). While either count is at its
limit the endpoint answers 429 with Retry-After at once: no database lookup, no HMAC. Accepted deliveries
count nothing, and a sender's own mistakes after a valid signature (bad JSON, a disabled hook) are its
rejections log's business, not the limit's. The per-hook limit (higher) bounds what many addresses
together can make the endpoint do; the price is that a flood at one hook delays its real deliveries
(senders retry on 429) until the window ends.

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
    if ratelimit.over(by_hook, hook_id, now):
        return by_hook.retry_after(now), (
            f"too many rejected requests for this webhook (at most {by_hook.limit} per {by_hook.window_s} s): "
            f"retry in {by_hook.retry_after(now)} s")
    return None


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
