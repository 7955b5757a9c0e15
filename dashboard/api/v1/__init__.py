"""The versioned REST API, /api/v1/ (django-ninja): OpenAPI 3 generated from these modules at
/api/v1/openapi.json, browsable at /api/v1/docs (Swagger UI served from static/, no CDN).

Authentication and scopes: dashboard/api/v1/auth.py; errors: dashboard/api/v1/problems.py (RFC 9457).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, path
from ninja import NinjaAPI, Swagger
from ninja.parser import Parser

from dashboard.api.http import json_body
from dashboard.api.v1 import definitions, instances, problems, reviews, stream, system, triggers
from dashboard.api.v1.auth import AUTH
from dashboard.security import tokens

PROBLEM_RESPONSES = {
    "400": "Bad request", "401": "Not authenticated", "403": "Not allowed (scope or permission)",
    "404": "Not found", "409": "Conflict with the current state", "413": "Payload too large",
    "422": "Invalid request (field errors)", "429": "Rate limited (see Retry-After)",
}
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
        "detail": {"type": "string"}, "instance": {"type": "string"},
        "errors": {"type": "array", "items": {"type": "object", "properties": {
            "field": {"type": "string"}, "node": {"type": "string"}, "message": {"type": "string"}}}},
    },
}


class StrictParser(Parser):
    """Bodies parsed as the rest of the API parses them (workflows/engine/strict_json.py): no NaN, no
    duplicate-key games, bounded depth. A refusal reaches problems.py as the HttpError's cause."""

    def parse_body(self, request: HttpRequest) -> Any:
        return json_body(request)


class SteadyflowAPI(NinjaAPI):
    _schemas: dict[str, Any]

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        """The schema, made once per process (it costs a walk of every endpoint and model, and any user
        may ask for it): the routes do not change while the process runs."""
        cache = self.__dict__.setdefault("_schemas", {})
        key = repr((args, sorted(kwargs.items())))
        if key not in cache:
            cache[key] = self._make_schema(*args, **kwargs)
        return cache[key]

    def _make_schema(self, *args: Any, **kwargs: Any) -> Any:
        """Document the problem responses every operation may answer."""
        schema = super().get_openapi_schema(*args, **kwargs)
        schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
        content = {problems.CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, description in PROBLEM_RESPONSES.items():
                    if operation.get("security") is None and status in ("401", "403", "429"):
                        continue
                    responses.setdefault(status, {"description": description, "content": content})
                if "429" in responses:
                    responses["429"]["headers"] = {"Retry-After": {"schema": {"type": "integer"}}}
        return schema


def docs_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The schema and the docs page are for users: a session or a valid token. Others are sent to log
    in (the page) or get a 401 problem (the schema)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
            try:
                if scheme.lower() != "bearer":
                    raise tokens.TokenRefused("no token")
                tokens.authenticate(presented.strip())
            except tokens.TokenRefused:
                if request.path.endswith("/docs"):
                    return redirect_to_login(request.get_full_path())
                return problems.response(request, 401, "authentication required: send a token or log in")
        return view(request, *args, **kwargs)

    return wrapper


api = SteadyflowAPI(title="Steadyflow API", version="1", urls_namespace="v1", auth=AUTH, parser=StrictParser(),
                    docs_decorator=docs_access,
                    # No deep links: Swagger UI puts each as a link inside the operation's toggle button,
                    # a control nested in a control (axe-core: nested-interactive).
                    docs=Swagger(settings={"deepLinking": False}),
                    description="Durable LLM workflows. Authenticate with an API token (`Authorization: Bearer "
                                "sf_…`, made on the API tokens page) or the dashboard session. Errors are RFC "
                                "9457 problem documents (application/problem+json).")
problems.install(api)
api.add_router("", instances.router)
api.add_router("", definitions.router)
api.add_router("", reviews.router)
api.add_router("", system.router)
api.add_router("", triggers.router)


def _problems_for_everything(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """ninja answers a wrong method with a bare 405, and its root URL with Django's HTML 404: make them
    problem documents too."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            response = view(request, *args, **kwargs)
        except Http404:
            return not_found(request)
        if response.status_code == 405 and response.get("Content-Type") != problems.CONTENT_TYPE:
            allowed = response.get("Allow", "")
            fixed = problems.response(request, 405, f"method {request.method} not allowed here (use {allowed})")
            fixed["Allow"] = allowed
            return fixed
        return response

    return wrapper


def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    return problems.response(request, 404, f"no API endpoint {request.method} {request.path}")


def urls() -> tuple[list[Any], str, str]:
    patterns, app_name, namespace = api.urls
    # The event stream is an async Django view (server-sent events), outside ninja's sync operations.
    wrapped: list[Any] = [path("instances/<int:instance_id>/events/stream", stream.event_stream,
                               name="event_stream")]
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            pattern.callback = _problems_for_everything(pattern.callback)
        wrapped.append(pattern)
    wrapped.append(path("<path:rest>", not_found, name="not-found"))
    return wrapped, app_name, namespace
