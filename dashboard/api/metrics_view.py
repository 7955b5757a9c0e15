"""GET /metrics for Prometheus (docs/operating.md, Observability).

Not behind the login (a scraper has no session) but behind `STEADYFLOW_METRICS_TOKEN` (a bearer
token) and/or `STEADYFLOW_METRICS_ALLOW` (client addresses or CIDRs); with both set, a scrape needs
both. With neither configured only loopback may scrape, and only with DEBUG: production never
serves metrics to anyone by accident.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from workflows.adapters import ratelimit
from workflows.observability import metrics

log = logging.getLogger("steadyflow.metrics")
FAILURE_WINDOW_S = 60


def _address_allowed(address: str, networks: list[str]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(network, strict=False) for network in networks)


def _refusal(request: HttpRequest) -> JsonResponse | None:
    token: str = settings.METRICS_TOKEN
    allow: list[str] = settings.METRICS_ALLOW
    address = request.META.get("REMOTE_ADDR") or ""
    if not token and not allow:
        if settings.DEBUG and _address_allowed(address, ["127.0.0.0/8", "::1/128"]):
            return None
        return JsonResponse({"error": "metrics are not enabled: set STEADYFLOW_METRICS_TOKEN or "
                                      "STEADYFLOW_METRICS_ALLOW"}, status=403)
    if allow and not _address_allowed(address, allow):
        return JsonResponse({"error": "this address may not read metrics"}, status=403)
    if token:
        window = ratelimit.Window("metrics-fail", int(settings.METRICS_MAX_FAILURES), FAILURE_WINDOW_S)
        now = time.time()
        if ratelimit.over(window, address, now):
            # Guessing is throttled: past the failures allowed, even the right token waits the window out.
            response = JsonResponse({"error": "too many failed metrics requests from this address"}, status=429)
            response["Retry-After"] = str(window.retry_after(now))
            return response
        scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            if ratelimit.hit(window, address, now) == window.limit:
                log.warning("metrics: %d failed scrapes from %s, refused for %d s", window.limit, address,
                            window.retry_after(now))
            response = JsonResponse({"error": "a valid bearer token is required"}, status=401)
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    return None


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    refused = _refusal(request)
    if refused is not None:
        return refused
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)
