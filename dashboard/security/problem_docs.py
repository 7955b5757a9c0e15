"""RFC 9457 problem documents, the shape of every v1 error (dashboard/api/v1/problems.py says more):
here, below the API, because the security middleware answers /api/v1/ with one too (headers.py's
NUL refusal, before any view).
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse

CONTENT_TYPE = "application/problem+json"

# status -> (type slug, title) for the errors the API answers.
KINDS: dict[int, tuple[str, str]] = {
    400: ("bad-request", "Bad request"),
    401: ("unauthenticated", "Authentication required"),
    403: ("forbidden", "Permission denied"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    409: ("conflict", "Conflict with the current state"),
    413: ("too-large", "Payload too large"),
    422: ("validation", "Invalid request"),
    429: ("rate-limited", "Too many requests"),
    500: ("internal", "Internal error"),
    503: ("unavailable", "Service unavailable"),
}


def problem_body(status: int, detail: str, path: str, errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    slug, title = KINDS.get(status, ("error", "Error"))
    body: dict[str, Any] = {"type": f"urn:steadyflow:problem:{slug}", "title": title, "status": status,
                            "detail": detail, "instance": path}
    if errors:
        body["errors"] = errors
    return body


def response(request: HttpRequest, status: int, detail: str, errors: list[dict[str, Any]] | None = None,
             headers: dict[str, str] | None = None) -> HttpResponse:
    out = HttpResponse(json.dumps(problem_body(status, detail, request.path, errors)), status=status,
                       content_type=CONTENT_TYPE)
    for name, value in (headers or {}).items():
        out[name] = value
    if status == 401:
        out["WWW-Authenticate"] = 'Bearer realm="steadyflow"'
    return out
