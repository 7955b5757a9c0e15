"""`POST /api/workflows/<slug>/plan`: the editor's "Plan with AI" (and, through `plan_json`, the v1 API's).

A designer states an objective; an LLM proposes a graph (workflows/authoring/planning.py). A proposal that does
not validate is refused (400) with `errors` naming each problem's node; a valid one is returned as
{graph, issues: [], usage} and is not saved: it becomes a version only when the designer saves it.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from dashboard.api.editor_api import definition_or_404, graph_diff
from dashboard.api.http import BadRequest, BodyRejected, api_view, json_body
from dashboard.security import permissions
from workflows.authoring import planning
from workflows.engine.planner import plan_issues_text

# Plans being made at once in this process: each holds a thread (and a provider connection) for as long
# as the LLM takes, so a few users pressing "Plan" cannot take every thread. Past it: 429 + Retry-After.
RETRY_AFTER_S = 10
_planning = threading.BoundedSemaphore(1)  # replaced by _slots() with the configured size
_planning_size = 0
_planning_lock = threading.Lock()


def _slots() -> threading.BoundedSemaphore:
    global _planning, _planning_size
    size = int(settings.STEADYFLOW["PLANNER_CONCURRENCY"])
    with _planning_lock:
        if size != _planning_size:
            _planning, _planning_size = threading.BoundedSemaphore(size), size
        return _planning


def plan_json(slug: str, body: dict[str, Any]) -> dict[str, Any]:
    """Plan for workflow `slug` from a request body ({objective, provider?, credential?, model?, script?,
    current?}: with `current`, a graph, the answer adds `diff`, from it to the proposal). Raises
    BadRequest: 400 naming the nodes of an invalid proposal, 422 for a reply that is no graph, 429 when
    STEADYFLOW_PLANNER_CONCURRENCY plans are being made already, 502 when the provider fails."""
    definition_or_404(slug)
    slots = _slots()
    if not slots.acquire(blocking=False):
        raise BadRequest(f"{_planning_size} plans are being made already (STEADYFLOW_PLANNER_CONCURRENCY): "
                         f"retry in {RETRY_AFTER_S} s", 429, retry_after=RETRY_AFTER_S)
    try:
        plan = planning.propose(planning.request_from(body))
    except planning.PlanFailed as exc:
        raise BadRequest(str(exc), exc.status) from None
    finally:
        slots.release()
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
