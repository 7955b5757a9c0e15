"""The operators' review queue in the dashboard: the item, its instance's graph and timeline, and
the decision form on one page, so deciding needs no other page."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from dashboard import permissions
from dashboard.permissions import authorize
from workflows import review
from workflows.forms import ReviewDecisionForm
from workflows.models import ReviewItem, ReviewReason, ReviewStatus, StepRun

# The pages show the item's instance (its version's graph, steps and events) as well as the item.
VIEW_PERMISSIONS = (permissions.VIEW_REVIEWS, permissions.VIEW_INSTANCES)


def _get_item_for_user(request: HttpRequest, item_id: int) -> ReviewItem:
    return get_object_or_404(ReviewItem.objects.select_related("instance__version__definition", "decided_by"),
                             pk=item_id)


@authorize(*VIEW_PERMISSIONS)
def review_list(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", ReviewStatus.OPEN)
    reason = request.GET.get("reason", "")
    items = ReviewItem.objects.select_related("instance__version__definition", "decided_by")
    if status:
        items = items.filter(status=status)
    if reason:
        items = items.filter(reason=reason)
    page = Paginator(items.order_by("created_at" if status == ReviewStatus.OPEN else "-created_at"), 50) \
        .get_page(request.GET.get("page"))
    return render(request, "review/list.html", {
        "page": page, "status": status, "reason": reason, "statuses": ReviewStatus.choices,
        "reasons": ReviewReason.choices, "can_decide": review.can_decide(request.user)})


@authorize(*VIEW_PERMISSIONS)
def review_detail(request: HttpRequest, item_id: int) -> HttpResponse:
    """The item and its decision form, offered only to who may decide this item (review.refusal: the
    decide permission and, for a human task, its assignee group); a POST from anyone else is a 403."""
    item = _get_item_for_user(request, item_id)
    refused = review.refusal(request.user, item)
    form = ReviewDecisionForm(request.POST or None, item=item)
    if request.method == "POST":
        if refused is not None:
            raise PermissionDenied(refused)
        if form.is_valid():
            try:
                review.decide(item.pk, request.user, form.decision())
            except review.ReviewConflict as exc:
                messages.error(request, f"Not applied: {exc}")
                return redirect("review-detail", item_id=item.pk)
            except review.ReviewError as exc:  # ReviewForbidden too: the four-eyes rule
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Decision applied: {form.cleaned_data['action']}")
                return redirect("review-detail", item_id=item.pk)
    instance = item.instance
    steps = StepRun.objects.filter(instance=instance).order_by("id")
    latest = {}
    for step in steps:
        latest[step.node_id] = step.status
    return render(request, "review/detail.html", {
        "item": item, "instance": instance, "form": form, "can_decide": refused is None, "refusal": refused,
        "events": instance.events.order_by("-seq")[:200], "steps": steps,
        "graph": instance.version.graph, "node_status": latest,
        "audit": item.audit.select_related("actor").order_by("created_at"),
    })
