"""What every JSON endpoint shares, the pages' and the v1 API's: the `api_view` decorator (login,
method and permission checks answered as JSON), `error`, the strict `json_body` and its
`BodyRejected`, `BadRequest`, and the JSON answers for a CSRF failure and an unknown /api/ path.
Errors are JSON objects with a `message` (and `errors` for invalid graphs).

May import: dashboard.security and the engine's strict JSON parser; nothing else of dashboard/.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse

from dashboard.security import permissions, tokens
from workflows.engine import strict_json

View = Callable[..., JsonResponse]


def error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"message": message, **extra}, status=status)


def api_view(methods: tuple[str, ...], perm: str | tuple[str, ...] | None = None) -> Callable[[View], View]:
    """Login and permission checks (dashboard/security/permissions.py) that answer JSON (401/403) instead of
    redirecting to a page. `perm`: the permission, or permissions, every request needs."""
    perms = (perm,) if isinstance(perm, str) else tuple(perm or ())

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
            if not request.user.is_authenticated:
                return error(401, "authentication required")
            wait = tokens.retry_after(request.user.pk)  # per user, as the v1 API's calls
            if wait is not None:
                response = error(429, tokens.rate_message(wait))
                response["Retry-After"] = str(wait)
                return response
            if request.method not in methods:
                return error(405, f"method {request.method} not allowed (use {', '.join(methods)})")
            message = permissions.refusal(request.user, *perms)
            if message is not None:
                return error(403, message)
            try:
                return view(request, *args, **kwargs)
            except Http404 as exc:
                # Django's own 404 is an HTML page; API clients get JSON with a message.
                return error(404, str(exc) or "not found")

        return wrapper

    return decorator


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: JSON for the API, Django's usual page elsewhere."""
    from django.views.csrf import csrf_failure as html_csrf_failure

    if request.path.startswith("/api/"):
        return error(403, f"CSRF check failed: {reason} (send the csrftoken cookie's value in X-CSRFToken)")
    return html_csrf_failure(request, reason)


def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Any /api/ path no endpoint matches (urls.py routes it here last): JSON, not the HTML 404 page."""
    return error(404, f"no API endpoint {request.method} {request.path}")


class BodyRejected(ValueError):
    """A request body the API will not take; `status` is 413 when too large, else 400."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def json_body(request: HttpRequest) -> Any:
    """The request's JSON ({} when empty), parsed strictly (workflows/engine/strict_json.py): malformed,
    over-deep, non-finite, out-of-range or non-Unicode input raises BodyRejected naming the problem."""
    try:
        body = request.body
    except RequestDataTooBig:
        raise BodyRejected(f"the request body is too large ({settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes at most)",
                           413) from None
    if not body:
        return {}
    try:
        return strict_json.loads(body)
    except strict_json.JSONRejected as exc:
        raise BodyRejected(str(exc)) from None


class BadRequest(Exception):
    """A request the client must fix: the JSON endpoints answer it as an error with this status (and
    `extra`, e.g. `errors` naming each problem), the v1 API as a problem document (dashboard/api/v1/problems.py)."""

    def __init__(self, message: str, status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.extra = extra

    def response(self) -> JsonResponse:
        answer = error(self.status, self.message, **self.extra)
        if "retry_after" in self.extra:
            answer["Retry-After"] = str(self.extra["retry_after"])
        return answer


def object_body(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    """The request's JSON object, or the 4xx answer naming what is wrong with it."""
    try:
        body = json_body(request)
    except BodyRejected as exc:
        return error(exc.status, str(exc))
    if not isinstance(body, dict):
        return error(400, "the request body must be a JSON object")
    return body
