"""v1 review items: list with filters, get, decide. Deciding goes through workflows.operators.review.decide, which
applies the same rules as the dashboard: the decide permission, a human task's assignee group
(review.refusal), the four-eyes rule, and one decision per item (a second is a 409)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from dashboard.api.v1.auth import need
from dashboard.api.v1.pages import PAGE_MOST, cursor_field, newest_first
from dashboard.api.v1.problems import Problem
from dashboard.security import permissions
from workflows.models import ReviewItem, ReviewReason, ReviewStatus
from workflows.operators import review

router = Router(tags=["reviews"])
VIEW = (permissions.VIEW_REVIEWS, permissions.VIEW_INSTANCES)


def item_json(item: ReviewItem, user: Any = None) -> dict[str, Any]:
    details = item.details or {}
    out = {
        "id": item.pk, "instance": item.instance_id, "workflow": item.instance.version.definition.slug,
        "node": item.node_id or None, "reason": item.reason, "status": item.status,
        "assignee_group": item.assignee_group or None, "message": details.get("message") or details.get("prompt", ""),
        "details": details, "decision": item.decision,
        "decided_by": item.decided_by.get_username() if item.decided_by else None,
        "decided_at": item.decided_at.isoformat() if item.decided_at else None,
        "note": item.note, "created_at": item.created_at.isoformat(),
    }
    if user is not None:
        out["can_decide"] = review.can_decide(user, item)
    return out


def item_or_404(item_id: int) -> ReviewItem:
    item: ReviewItem | None = ReviewItem.objects.select_related("instance__version__definition", "decided_by")\
        .filter(pk=item_id).first()
    if item is None:
        raise Problem(404, f"review item {item_id} does not exist")
    return item


class ReviewFilters(Schema):
    status: ReviewStatus | None = Field(ReviewStatus("open"), description="Default: open items.")
    reason: ReviewReason | None = None
    workflow: str | None = Field(None, max_length=200)
    instance: int | None = Field(None, ge=1, le=2**62)
    cursor: str | None = cursor_field()
    limit: int = Field(50, ge=1, le=PAGE_MOST)


@router.get("/reviews", response=dict[str, Any], summary="List review items")
def list_reviews(request: HttpRequest, filters: Query[ReviewFilters]) -> dict[str, Any]:
    """Newest first; follow `next_cursor` (null on the last page)."""
    need(request, "read", *VIEW)
    rows = ReviewItem.objects.select_related("instance__version__definition", "decided_by")
    if filters.status:
        rows = rows.filter(status=filters.status)
    if filters.reason:
        rows = rows.filter(reason=filters.reason)
    if filters.workflow:
        rows = rows.filter(instance__version__definition__slug=filters.workflow)
    if filters.instance:
        rows = rows.filter(instance_id=filters.instance)
    return newest_first(rows, filters.cursor, filters.limit, item_json)


@router.get("/reviews/{item_id}", response=dict[str, Any], summary="Get a review item")
def get_review(request: HttpRequest, item_id: int) -> dict[str, Any]:
    need(request, "read", *VIEW)
    return item_json(item_or_404(item_id), request.user)


class DecisionIn(Schema):
    action: str = Field(description=f"One of {', '.join(review.ACTIONS)}.")
    note: str = Field("", max_length=2000)
    extra_transitions: int | None = None
    extra_budget_usd: str | float | None = None
    extra_tokens: int | None = None
    extra_ttl_s: float | None = None
    context: dict[str, Any] | None = None
    goto: str | None = Field(None, max_length=200)
    inputs: dict[str, Any] = Field(default_factory=dict, description="A human task's declared inputs.")


@router.post("/reviews/{item_id}/decide", response=dict[str, Any], summary="Decide a review item")
def decide(request: HttpRequest, item_id: int, body: DecisionIn) -> dict[str, Any]:
    need(request, "operate", *VIEW, permissions.DECIDE)
    item_or_404(item_id)
    try:
        review.decide(item_id, request.user, review.Decision(**body.dict()))
    except review.ReviewForbidden as exc:
        raise Problem(403, str(exc)) from None
    except review.ReviewConflict as exc:
        raise Problem(409, str(exc)) from None
    except review.ReviewError as exc:
        raise Problem(400, str(exc)) from None
    return item_json(item_or_404(item_id), request.user)
