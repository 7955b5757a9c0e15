"""`POST /api/workflows/<slug>/plan`: the editor's "Plan with AI" (and, through `plan_json`, the v1 API's).

A designer states an objective; an LLM proposes a graph (workflows/planning.py). A proposal that does
not validate is refused (400) with `errors` naming each problem's node; a valid one is returned as
{graph, issues: [], usage} and is not saved: it becomes a version only when the designer saves it.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from dashboard import permissions
from dashboard.api import BadRequest, BodyRejected, api_view, json_body
from dashboard.editor_api import definition_or_404, graph_diff
from workflows import planning
from workflows.engine.planner import plan_issues_text


def plan_json(slug: str, body: dict[str, Any]) -> dict[str, Any]:
    """Plan for workflow `slug` from a request body ({objective, provider?, credential?, model?, script?,
    current?}: with `current`, a graph, the answer adds `diff`, from it to the proposal). Raises
    BadRequest: 400 naming the nodes of an invalid proposal, 422 for a reply that is no graph, 502 when
    the provider fails."""
    definition_or_404(slug)
    try:
        plan = planning.propose(planning.request_from(body))
    except planning.PlanFailed as exc:
        raise BadRequest(str(exc), exc.status) from None
    if plan.issues:
        raise BadRequest(f"the proposal was refused: {plan_issues_text(plan.issues)}",
                         errors=[issue.as_dict() for issue in plan.issues], graph=plan.graph, usage=plan.usage)
    graph = plan.graph
    current = body.get("current")
    kept = []
    if isinstance(current, dict) and isinstance(current.get("input"), dict) and "input" not in graph:
        # The planner proposes nodes and edges; the workflow's declared start input (what its callers
        # send) stays unless the proposal declares its own.
        graph = {**graph, "input": current["input"]}
        kept.append("input")
    answer: dict[str, Any] = {"graph": graph, "issues": [], "usage": plan.usage}
    if kept:
        answer["kept"] = kept
    if isinstance(current, dict):
        # The editor previews the proposal as a diff against its canvas (the versions dialog's shape).
        answer["diff"] = graph_diff(current, graph)
    return answer


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
