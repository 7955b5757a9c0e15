"""What the pages' scripts need to know about the server, served instead of copied into JavaScript.

The statuses and the event -> state tables come from the engine (workflows/engine/statuses.py,
workflows/engine/event_kinds.py); the colours the graphs draw each status in live here. Every page
gets them in a `json_script` block (`sf-meta`, rendered by base.html through the `meta` context
processor) so no script waits for a request; `GET /api/meta` serves the same document to other clients.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.http import HttpRequest, JsonResponse

from dashboard.api.http import api_view
from workflows.engine import event_kinds
from workflows.engine.statuses import InstanceStatus, StepStatus

_I = InstanceStatus
_S = StepStatus
# The halo (editor, review) and fill (live page) of a node in each instance or step status.
STATUS_COLORS: dict[str, str] = {
    _S.PENDING: "#cbd5e1", _S.QUEUED: "#93c5fd", _S.RUNNING: "#2563eb", _S.RETRYING: "#f59e0b",
    _I.WAITING: "#f59e0b", _S.SUCCEEDED: "#16a34a", _I.COMPLETED: "#16a34a", _S.FAILED: "#dc2626",
    _I.HALTED: "#d97706", _I.COMPENSATING: "#a855f7", _S.COMPENSATED: "#7c3aed", _S.CANCELLED: "#64748b",
    _S.SKIPPED: "#94a3b8",
}
# Statuses whose fill is light enough to need dark text on the live page.
LIGHT_STATUSES: tuple[str, ...] = (_S.PENDING, _S.QUEUED, _S.SKIPPED, _S.CANCELLED)
# The dashboard's tiles, in the order an operator scans them (active first).
DASHBOARD_ORDER: tuple[str, ...] = (
    _I.RUNNING, _I.WAITING, _I.PENDING, _I.HALTED, _I.COMPLETED, _I.FAILED, _I.CANCELLED, _I.COMPENSATING,
    _I.COMPENSATED,
)
# The live page's legend: the node states a graph shows.
LEGEND: tuple[str, ...] = (
    _S.PENDING, _S.QUEUED, _S.RUNNING, _S.RETRYING, _S.SUCCEEDED, _S.FAILED, _S.SKIPPED, _S.COMPENSATED,
    _I.HALTED, _S.CANCELLED,
)


@cache
def ui_meta() -> dict[str, Any]:
    """The document `sf-meta` and `GET /api/meta` hold (constants: built once per process)."""
    return {
        **event_kinds.tables(),
        "statusColors": {str(k): v for k, v in STATUS_COLORS.items()},
        "lightStatuses": [str(s) for s in LIGHT_STATUSES],
        "dashboardOrder": [str(s) for s in DASHBOARD_ORDER],
        "legend": [str(s) for s in LEGEND],
    }


def context(request: HttpRequest) -> dict[str, Any]:
    """Template context processor: `sf_meta` for base.html's json_script block (logged-in pages only)."""
    user = getattr(request, "user", None)
    return {"sf_meta": ui_meta()} if user is not None and user.is_authenticated else {}


@api_view(("GET",), perm="workflows.view_workflowinstance")
def meta(request: HttpRequest) -> JsonResponse:
    return JsonResponse(ui_meta())
