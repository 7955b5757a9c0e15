"""Response hardening Django does not do by itself (Django 5.2 has no Content-Security-Policy).

The policy comes from settings.CONTENT_SECURITY_POLICY. Pages keep every script in static files and
hand data to them through `json_script` blocks and data attributes, so no inline script and no eval
is needed (the editor checks JSON Schemas with static/js/lib/schema-check.js, not Ajv, which compiles
schemas with `new Function`).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils.deprecation import MiddlewareMixin

from dashboard.security import problem_docs

HEADER = "Content-Security-Policy"


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """MiddlewareMixin makes it sync and async capable: no thread hop per request under daphne."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        policy = settings.CONTENT_SECURITY_POLICY
        # Django's DEBUG error pages are all inline script and style: leave them readable in development.
        debug_page = settings.DEBUG and response.status_code >= 400
        if policy and HEADER not in response and not debug_page:
            response[HEADER] = policy
        return response


class RejectNulMiddleware(MiddlewareMixin):
    """A NUL character in the path or the query string is refused with a 400 before any view: PostgreSQL
    cannot hold one in a text column or a query parameter, and raises (a 500) when a filter carries it.
    Form fields refuse it already (Django's CharField); JSON bodies in workflows/engine/strict_json.py."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if "\x00" not in request.path and not any(
                "\x00" in key or any("\x00" in value for value in values) for key, values in request.GET.lists()):
            return None
        message = "the URL holds a NUL character (%00), which is never valid here"
        if request.path.startswith("/api/v1/"):
            # The v1 API answers every error as a problem document.
            return problem_docs.response(request, 400, message)
        if request.path.startswith("/api/"):
            return JsonResponse({"message": message}, status=400)
        return HttpResponseBadRequest(message, content_type="text/plain")
