"""GET /api/reviews: the review inbox as JSON (the navigation's live count badge and other clients).

`?status=` (default open), `?reason=`, `?sort=oldest|newest`, `?limit=` (at most 100). An unknown value
is a 400 naming it. The answer: {"open": <open items of every reason>, "by_reason": {...},
"items": [...]}."""

from __future__ import annotations

from django.db.models import Count
from django.http import HttpRequest, JsonResponse

from dashboard.api.http import api_view, error
from dashboard.pages import review_facts
from dashboard.pages.review_views import VIEW_PERMISSIONS, filtered_items
from workflows.models import ReviewItem, ReviewStatus

MAX_ITEMS = 100


@api_view(("GET",), perm=VIEW_PERMISSIONS)
def reviews(request: HttpRequest) -> JsonResponse:
    items, _, errors = filtered_items(request.GET)
    if errors:
        return error(400, "; ".join(errors))
    raw = request.GET.get("limit", "20")
    if not (raw.isascii() and raw.isdecimal() and len(raw) <= 3 and int(raw) <= MAX_ITEMS):
        return error(400, f"'limit' must be a whole number from 0 to {MAX_ITEMS}, not {raw!r}")
    by_reason = dict(ReviewItem.objects.filter(status=ReviewStatus.OPEN).order_by().values_list("reason")
                     .annotate(n=Count("id")))
    return JsonResponse({"open": sum(by_reason.values()), "by_reason": by_reason,
                         "items": [review_facts.item_json(item) for item in items[:int(raw)]]})
