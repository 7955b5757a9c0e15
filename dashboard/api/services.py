"""What the pages' endpoints and the v1 API both do, request aside: start instances of a workflow,
find a workflow or a version, save a new version, plan with AI. Each raises BadRequest (its status
and JSON details; dashboard/api/http.py) for the caller to answer with; the shapes of the answers
are dashboard/api/shapes.py.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings

from dashboard.api import diff_details, shapes
from dashboard.api.http import BadRequest
from workflows import runtime
from workflows.authoring import planning
from workflows.authoring.definitions import save_version
from workflows.engine.errors import ExpressionError, GraphInvalid, PayloadTooLarge
from workflows.engine.inputs import InputInvalid
from workflows.engine.planner import plan_issues_text
from workflows.engine.priorities import PriorityInvalid, parse_priority
from workflows.models import WorkflowDefinition, WorkflowInstance, WorkflowVersion

MAX_IDEMPOTENCY_KEY = 200  # WorkflowInstance.idempotency_key's max_length
MAX_MESSAGE = 500  # WorkflowVersion.message's max_length


# --- Starting instances ---------------------------------------------------------------------------------

BULK_START_MOST = 1000


def check_idempotency_key(key: Any) -> str | None:
    if key == "":
        return None
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= MAX_IDEMPOTENCY_KEY):
        raise BadRequest(f"the idempotency key must be a string of 1-{MAX_IDEMPOTENCY_KEY} characters")
    return key


def start_workflow(slug: str, inputs: list[dict[str, Any]], keys: list[str | None] | None,
                   user: Any, traceparent: str | None = None, priority: Any = None) -> list[WorkflowInstance]:
    """Start instances of a workflow's latest version: what the JSON endpoints and the v1 API both call.
    `traceparent`: the request's W3C header (joined when valid, ignored otherwise). `priority`: high,
    normal (None) or low. Raises BadRequest (404 unknown workflow, 409 no version, 413 too large, 400
    otherwise)."""
    try:
        level = parse_priority(priority)
    except PriorityInvalid as exc:
        raise BadRequest(str(exc), fields={exc.field: str(exc)}) from None
    definition = WorkflowDefinition.objects.filter(slug=slug, archived=False).first()
    if definition is None:
        raise BadRequest(f"workflow {slug!r} does not exist", 404)
    version = definition.latest_version()
    if version is None:
        raise BadRequest(f"workflow {slug!r} has no saved version", 409)
    if len(inputs) > BULK_START_MOST:
        raise BadRequest(f"at most {BULK_START_MOST} instances per request (got {len(inputs)})")
    for key in keys or []:
        check_idempotency_key(key)
    try:
        # Stored in the clients' namespace (runtime/starting.py: internal starts have their own).
        stored = [runtime.client_key(key) for key in keys] if keys is not None else None
        return runtime.start_instances(version, inputs, idempotency_keys=stored, user=user, traceparent=traceparent,
                                       priority=level)
    except PayloadTooLarge as exc:
        raise BadRequest(exc.message, 413) from None
    except GraphInvalid as exc:
        raise BadRequest("the saved graph is invalid", errors=[i.as_dict() for i in exc.issues]) from None
    except InputInvalid as exc:
        raise BadRequest(exc.message, **input_error_details(exc)) from None
    except ExpressionError as exc:
        # A start node's condition that cannot be decided on this input (a missing field, a limit):
        # decided before the start's transaction, so nothing was created.
        raise BadRequest(f"cannot start: {exc}") from None
    except ValueError as exc:  # one key twice
        raise BadRequest(str(exc)) from None


def input_error_details(exc: InputInvalid) -> dict[str, Any]:
    """What a 400 adds to name each field of the start input the workflow's declared input refuses:
    {"message": "input.amount: must be a number", "error": (the same), "fields": {"amount": "must be a
    number"}}, plus "index" (which input) for a bulk start."""
    extra: dict[str, Any] = {"error": exc.message, "fields": exc.fields}
    if exc.index is not None:
        extra["index"] = exc.index
    return extra


# --- Workflows and versions ---------------------------------------------------------------------------

def definition_or_404(slug: str) -> WorkflowDefinition:
    definition = WorkflowDefinition.objects.filter(slug=slug).first()
    if definition is None:
        raise BadRequest(f"workflow {slug!r} does not exist", 404)
    return definition


def version_or_404(definition: WorkflowDefinition, number: Any) -> WorkflowVersion:
    try:
        number = int(number)
    except (TypeError, ValueError):
        raise BadRequest(f"version must be a whole number, not {number!r}") from None
    version = definition.versions.filter(number=number).select_related("created_by").first()
    if version is None:
        raise BadRequest(f"workflow {definition.slug!r} has no version {number}", 404)
    return version


def save_new_version(slug: str, body: dict[str, Any], user: Any) -> tuple[WorkflowVersion, WorkflowVersion | None]:
    """Save `body["graph"]` as the workflow's next version (the editor's save and the v1 API's): a message
    is required, and `base_version` must be the latest unless `force`. Returns the new version and the one
    "save anyway" saved over (None when the edit started from the latest). Raises BadRequest."""
    definition = definition_or_404(slug)
    if definition.archived:
        raise BadRequest(f"workflow {slug!r} is archived: unarchive it before saving", 409)
    graph = body.get("graph")
    if not isinstance(graph, dict):
        raise BadRequest("'graph' must be a JSON object with 'nodes' and 'edges'")
    message = body.get("message", "")
    if not isinstance(message, str) or not message.strip():
        raise BadRequest("a version message is required: say what changed")
    if len(message) > MAX_MESSAGE:
        raise BadRequest(f"the version message is too long ({len(message)} characters, {MAX_MESSAGE} at most)")
    name = body.get("name")
    description = body.get("description")
    if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > 200):
        raise BadRequest("'name' must be a non-empty string of at most 200 characters")
    if description is not None and not isinstance(description, str):
        raise BadRequest("'description' must be a string")
    base = body.get("base_version")
    latest = definition.latest_version()
    stale = (latest.number if latest else None) != base
    if not body.get("force") and stale:
        # Someone saved since this editor loaded: say who and what, so the designer can decide.
        who = shapes.user_name(latest.created_by) if latest else None
        raise BadRequest(
            f"version {latest.number if latest else 'none'} was saved"
            f"{f' by {who}' if who else ''} after the version you started from "
            f"({base if base is not None else 'none'}): reload, or save anyway to replace it",
            409, **conflict_details(definition, base, latest, graph))
    try:
        version = save_version(slug, graph, name=name.strip() if name else None, description=description,
                               message=message.strip(), user=user)
    except GraphInvalid as exc:
        raise BadRequest(f"the graph is invalid ({len(exc.issues)} problem{'s' if len(exc.issues) != 1 else ''})",
                         errors=[issue.as_dict() for issue in exc.issues]) from None
    return version, latest if stale else None


def conflict_details(definition: WorkflowDefinition, base: Any, latest: WorkflowVersion | None,
                     graph: dict[str, Any]) -> dict[str, Any]:
    """What a save conflict shows: the version saved meanwhile (`latest`: number, author, time,
    message, and its `graph`), what it changed from the version this editor started from
    (`their_changes`, a graph diff; None when that version is unknown), and what saving anyway would
    change in it (`your_changes`, a diff from `latest` to the graph being saved)."""
    if latest is None:
        return {"latest": None}
    start = definition.versions.filter(number=base).first() if isinstance(base, int) else None
    return {
        "latest": {**shapes.version_summary(latest), "graph": latest.graph},
        "their_changes": diff_details.graph_diff(start.graph, latest.graph) if start is not None else None,
        "your_changes": diff_details.graph_diff(latest.graph, graph),
    }


# --- Planning with AI ------------------------------------------------------------------------------------

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
        answer["diff"] = diff_details.graph_diff(current, graph)
    return answer
