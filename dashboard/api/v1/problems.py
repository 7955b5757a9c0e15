"""RFC 9457 problem details: every v1 error is an `application/problem+json` document.

    {"type": "urn:steadyflow:problem:not-found", "title": "Not found", "status": 404,
     "detail": "instance 7 does not exist", "instance": "/api/v1/instances/7",
     "errors": [{"field": "body.input", "message": "..."}]}   # only when fields are at fault

`type` is a URN (a URI that need not resolve); `title` is fixed per type, `detail` says what happened
this time. `errors` uses the vocabulary of graph validation issues (`message`, plus `field`, `node` or
`edge` naming where), so clients read one shape for bad fields and bad graphs.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja.errors import AuthenticationError, HttpError, ValidationError

from dashboard.api.http import BadRequest, BodyRejected
from dashboard.database_away import DATABASE_AWAY_ERRORS, RETRY_AFTER_S, database_away
from dashboard.security.problem_docs import CONTENT_TYPE as CONTENT_TYPE
from dashboard.security.problem_docs import KINDS as KINDS
from dashboard.security.problem_docs import problem_body as problem_body
from dashboard.security.problem_docs import response as response

log = logging.getLogger("steadyflow.api")
class Problem(Exception):
    """Raise from an endpoint to answer a problem document."""

    def __init__(self, status: int, detail: str, errors: list[dict[str, Any]] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors
        self.headers = headers or {}


def field_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """pydantic's errors as {"field": "body.input", "message": ...}: `loc` joined with dots, without the
    name of the endpoints' body parameter (ninja puts it after "body")."""
    out = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        if loc[:2] == ["body", "body"]:
            loc = loc[:1] + loc[2:]
        out.append({"field": ".".join(loc), "message": str(error.get("msg", ""))})
    return out


def install(api: Any) -> None:
    """Answer every error the API raises as a problem document."""

    def on_problem(request: HttpRequest, exc: Problem) -> HttpResponse:
        return response(request, exc.status, exc.detail, exc.errors, exc.headers)

    def on_bad_request(request: HttpRequest, exc: BadRequest) -> HttpResponse:
        errors = exc.extra.get("errors")
        fields = exc.extra.get("fields")
        if isinstance(fields, dict):
            # A start input the workflow's declared input refuses (dashboard.api.services.input_error_details).
            index = exc.extra.get("index")
            where = "body.input" if index is None else f"body.inputs.{index}"
            errors = [{"field": f"{where}.{name}" if name else where, "message": str(problem)}
                      for name, problem in fields.items()]
        wait = exc.extra.get("retry_after")
        return response(request, exc.status, exc.message, errors if isinstance(errors, list) else None,
                        {"Retry-After": str(wait)} if wait is not None else None)

    def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        cause = exc.__cause__
        if isinstance(cause, BodyRejected):  # the strict JSON parser's reason (dashboard/api/v1/parser.py)
            return response(request, cause.status, str(cause))
        if isinstance(exc, AuthenticationError):
            return response(request, 401, "authentication required: send 'Authorization: Bearer sf_…' or log in")
        detail = str(exc)
        if exc.status_code == 403 and "CSRF" in detail:
            detail = "CSRF check failed: a session-authenticated request must send the csrftoken cookie's " \
                     "value in X-CSRFToken (or use a token)"
        return response(request, exc.status_code, detail)

    def on_validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        errors = field_errors(exc.errors)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5]) or "invalid request"
        return response(request, 422, detail, errors)

    def on_not_found(request: HttpRequest, exc: Exception) -> HttpResponse:
        return response(request, 404, str(exc) or "not found")

    def on_too_big(request: HttpRequest, exc: Exception) -> HttpResponse:
        # ninja reads request.body before the parser (dashboard/api/v1/__init__.py) could say so itself.
        return response(request, 413, f"the request body is too large ({settings.DATA_UPLOAD_MAX_MEMORY_SIZE} "
                                      "bytes at most)")

    def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
        # Logged with its traceback; the client gets no internals (they may hold secrets).
        log.exception("v1 API error on %s %s", request.method, request.path)
        return response(request, 500, "internal error: the server logged it")

    def on_database_away(request: HttpRequest, exc: Exception) -> HttpResponse:
        # As the pages (dashboard/urls.py handler500): a 503 to retry, logged once per episode.
        database_away.failed(exc)
        return response(request, 503, "the database is not answering; try again shortly",
                         headers={"Retry-After": str(RETRY_AFTER_S)})

    from django.http import Http404

    api.add_exception_handler(Problem, on_problem)
    api.add_exception_handler(BadRequest, on_bad_request)
    api.add_exception_handler(HttpError, on_http_error)
    api.add_exception_handler(ValidationError, on_validation)
    api.add_exception_handler(Http404, on_not_found)
    api.add_exception_handler(RequestDataTooBig, on_too_big)
    api.add_exception_handler(Exception, on_unexpected)
    for error in DATABASE_AWAY_ERRORS:
        api.add_exception_handler(error, on_database_away)
