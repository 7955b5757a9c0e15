"""POST /api/reviews/decide: the review inbox's bulk decision, {items: [id, ...], action: approve|reject,
note?}, each item decided as from its own page (review.decide: the item's assignee group, four eyes and
conflicts checked per item). One item that cannot be decided does not stop the others: the answer lists
`decided` ids and `failed` [{item, message}]."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from dashboard.api.core import BodyRejected, api_view, error, json_body
from dashboard.pages.review_views import VIEW_PERMISSIONS
from dashboard.security import permissions
from workflows.models import ReviewItem
from workflows.operators import operations, review

BULK_ACTIONS = ("approve", "reject")
MAX_ITEMS = 100


@api_view(("POST",), perm=(*VIEW_PERMISSIONS, permissions.DECIDE))
def decide_many(request: HttpRequest) -> JsonResponse:
    try:
        body = json_body(request)
    except BodyRejected as exc:
        return error(exc.status, str(exc))
    if not isinstance(body, dict):
        return error(400, "the request body must be a JSON object: {\"items\": [...], \"action\": \"approve\"}")
    items, action, note = body.get("items"), body.get("action"), body.get("note", "")
    if not isinstance(items, list) or not items or len(items) > MAX_ITEMS \
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        return error(400, f"'items' must be a list of 1 to {MAX_ITEMS} review item ids")
    if action not in BULK_ACTIONS:
        return error(400, f"'action' must be one of {', '.join(BULK_ACTIONS)} (the others need one item's page)")
    if not isinstance(note, str) or len(note) > 2000:
        return error(400, "'note' must be a string of at most 2000 characters")
    decided, failed = [], []
    for item_id in dict.fromkeys(items):
        try:
            review.decide(item_id, request.user, review.Decision(action=action, note=note or f"bulk {action}"))
        except ReviewItem.DoesNotExist:
            failed.append({"item": item_id, "message": f"review item {item_id} does not exist"})
        except (review.ReviewError, operations.OperationError, ValueError, TypeError) as exc:
            failed.append({"item": item_id, "message": str(exc)})
        else:
            decided.append(item_id)
    return JsonResponse({"action": action, "decided": decided, "failed": failed})
