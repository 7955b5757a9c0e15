"""The address this server is reached at, for the URLs a page shows for use elsewhere (a webhook's
URL to paste into another system): `STEADYFLOW_PUBLIC_URL` when set (behind a proxy that rewrites the
host, or a public name that differs from the one the operator browses), else the address of the
request itself (scheme, host and port, as the browser reached this page)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def public_base(request: HttpRequest) -> str:
    """"https://flows.example.com" or "http://127.0.0.1:8766": no trailing slash."""
    configured = settings.STEADYFLOW.get("PUBLIC_URL") or ""
    if configured:
        return configured.rstrip("/")
    return request.build_absolute_uri("/").rstrip("/")
