"""`POST /api/workflows/<slug>/plan`: the editor's "Plan with AI" (and, through services.plan_json, the v1
API's).

A designer states an objective; an LLM proposes a graph (workflows/authoring/planning.py). A proposal that does
not validate is refused (400) with `errors` naming each problem's node; a valid one is returned as
{graph, issues: [], usage} and is not saved: it becomes a version only when the designer saves it.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from dashboard.api.http import BadRequest, BodyRejected, api_view, json_body
from dashboard.api.services import plan_json
from dashboard.security import permissions


def _request_object(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json_body(request)
    except BodyRejected as exc:
        raise BadRequest(str(exc), exc.status) from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object: {\"objective\": \"...\"}")
    return body


@api_view(("POST",), perm=(permissions.VIEW_GRAPHS, permissions.SAVE_VERSION))
def plan(request: HttpRequest, slug: str) -> JsonResponse:
    try:
        return JsonResponse(plan_json(slug, _request_object(request)))
    except BadRequest as exc:
        return exc.response()
