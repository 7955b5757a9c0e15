"""The review inbox: every open item whatever its reason (loop, breaker, budget, TTL, poison,
compensation, human task), filtered and sorted by age and reason; each item's page shows why it is
open, the instance's context and recent steps, its graph with visit counts, and the decision form
(static/js/review/: generated for the item's reason, posted to the instance's review API). After a
decision the page moves on to the next open item (`review-next`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from dashboard.pages import review_evidence, review_facts
from dashboard.security import permissions
from dashboard.security.permissions import authorize
from workflows.models import ReviewItem, ReviewReason, ReviewStatus
from workflows.operators import review
from workflows.operators.forms import ReviewDecisionForm

# The pages show the item's instance (its version's graph, steps and events) as well as the item.
VIEW_PERMISSIONS = (permissions.VIEW_REVIEWS, permissions.VIEW_INSTANCES)
SORTS = {"oldest": "created_at", "newest": "-created_at"}


def _get_item_for_user(request: HttpRequest, item_id: int) -> ReviewItem:
    return get_object_or_404(ReviewItem.objects.select_related("instance__version__definition", "decided_by"),
                             pk=item_id)


def filtered_items(params: Any) -> tuple[QuerySet[ReviewItem], dict[str, str], list[str]]:
    """The items a query string asks for (status, reason, sort) and what was wrong with it: an unknown
    value is named and ignored rather than silently filtering down to nothing."""
    errors: list[str] = []
    chosen = {"status": params.get("status", ReviewStatus.OPEN).strip(), "reason": params.get("reason", "").strip(),
              "sort": params.get("sort", "").strip()}
    checks = (("status", ReviewStatus.values), ("reason", ReviewReason.values), ("sort", list(SORTS)))
    for name, allowed in checks:
        if chosen[name] and chosen[name] not in allowed:
            errors.append(f"'{name}' must be one of {', '.join(allowed)}, not {chosen[name]!r}")
            chosen[name] = ""
    # The inbox shows the item, its instance's id and its workflow: the instance's JSON and the version's
    # graph stay unread (a row of the list decoded them all before).
    items = (ReviewItem.objects.select_related("instance__version__definition", "decided_by")
             .defer("instance__input", "instance__context", "instance__state", "instance__error",
                    "instance__version__graph"))
    if chosen["status"]:
        items = items.filter(status=chosen["status"])
    if chosen["reason"]:
        items = items.filter(reason=chosen["reason"])
    # Open items oldest first (the longest waiting is the most urgent), decided ones newest first.
    default = "oldest" if chosen["status"] == ReviewStatus.OPEN else "newest"
    return items.order_by(SORTS[chosen["sort"] or default], "id"), chosen, errors


def next_open_item(after: int | None, reason: str = "") -> ReviewItem | None:
    """The oldest open item other than `after` (of `reason` when given)."""
    items = ReviewItem.objects.filter(status=ReviewStatus.OPEN)
    if reason in ReviewReason.values:
        items = items.filter(reason=reason)
    if after is not None:
        items = items.exclude(pk=after)
    return items.order_by("created_at", "id").first()


@authorize(*VIEW_PERMISSIONS)
def review_list(request: HttpRequest) -> HttpResponse:
    items, chosen, errors = filtered_items(request.GET)
    page = Paginator(items, 50).get_page(request.GET.get("page"))
    kept = {k: v for k, v in chosen.items() if v}
    if not chosen["status"]:
        kept["status"] = ""  # "any status" must survive paging (absent means open)
    return render(request, "review/list.html", {
        "page": page, "status": chosen["status"], "reason": chosen["reason"], "sort": chosen["sort"],
        "errors": errors, "query_string": urlencode(kept), "statuses": ReviewStatus.choices,
        "reasons": ReviewReason.choices, "sorts": list(SORTS), "can_decide": review.can_decide(request.user)})


@authorize(*VIEW_PERMISSIONS)
def review_next(request: HttpRequest) -> HttpResponse:
    """The next open item after `?after=<id>` (of `?reason=` when given), or the inbox when none is left."""
    raw = request.GET.get("after", "")
    after = int(raw) if raw.isascii() and raw.isdecimal() and len(raw) < 19 else None
    reason = request.GET.get("reason", "")
    item = next_open_item(after, reason)
    if item is None:
        messages.info(request, "Nothing left to review" + (f" for {reason}" if reason else "") + ".")
        return redirect("review-list")
    url = reverse("review-detail", args=[item.pk])
    return redirect(f"{url}?reason={reason}" if reason in ReviewReason.values else url)


def _next_url(item: ReviewItem, reason: str) -> str:
    query = {"after": item.pk, **({"reason": reason} if reason else {})}
    return f"{reverse('review-next')}?{urlencode(query)}"


@authorize(*VIEW_PERMISSIONS)
def review_detail(request: HttpRequest, item_id: int) -> HttpResponse:
    """The item and its decision form, offered only to who may decide this item (review.refusal: the
    decide permission and, for a human task, its assignee group); a POST from anyone else is a 403.
    The form is generated in the browser (static/js/review/decision-form.js); the server-rendered one
    below it is what a browser without scripts gets, and POSTs here."""
    item = _get_item_for_user(request, item_id)
    refused = review.refusal(request.user, item)
    reason_filter = request.GET.get("reason", "") if request.GET.get("reason", "") in ReviewReason.values else ""
    form = ReviewDecisionForm(request.POST or None, item=item)
    if request.method == "POST":
        if refused is not None:
            raise PermissionDenied(refused)
        if form.is_valid():
            try:
                decided = review.decide(item.pk, request.user, form.decision())
            except review.ReviewConflict as exc:
                messages.error(request, f"Not applied: {exc}")
                return redirect("review-detail", item_id=item.pk)
            except review.ReviewError as exc:  # ReviewForbidden too: the four-eyes rule
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Item #{item.pk}: {review_facts.decision_label(decided)}")
                return redirect(_next_url(item, reason_filter))
    instance = item.instance
    graph_nodes = [{"id": n.get("id"), "type": n.get("type")} for n in instance.version.graph.get("nodes", [])]
    why = review_facts.why(item, instance)
    next_url = _next_url(item, reason_filter)
    config: dict[str, Any] = {
        "item": review_facts.item_json(item),
        "why": why,
        "instance": {"id": instance.pk, "status": instance.status, "context": instance.context,
                     "input": instance.input},
        "nodes": graph_nodes,
        "canDecide": refused is None and item.status == ReviewStatus.OPEN,
        "urls": {"decide": reverse("api-instance-review", args=[instance.pk]),
                 "next": next_url, "instance": reverse("instance", args=[instance.pk])},
    }
    from dashboard.pages.views import node_types_for_pages

    return render(request, "review/detail.html", {
        "item": item, "instance": instance, "form": form, "can_decide": refused is None, "refusal": refused,
        "why": why, "decided_label": review_facts.decision_label(item),
        "events": instance.events.order_by("-seq")[:50], "steps": review_facts.recent_steps(instance),
        "graph": instance.version.graph, "node_states": review_facts.graph_states(item, instance),
        "node_types": node_types_for_pages(), "audit": review_facts.audit_rows(item), "config": config,
        "next_url": next_url, "evidence": review_evidence.evidence(item, instance),
    })
