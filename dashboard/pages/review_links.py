"""The page a notice's approve / reject / open link leads to (workflows/triggers/action_links.py).

It shows what is being decided and asks to confirm: a link in an email can be opened by a mail
scanner or a preview, so a GET never decides anything; only the POST of this page does. A plain link
decides as the logged-in user, through the same review.decide as the inbox (permissions, assignee
group, the human task's form fields, four eyes); login comes first (the authorize decorator sends the
approver to log in and back here). An emailed approver's link (bound to its recipient and channel)
needs no account: the channel's approver group stands in for the permission and group checks, and the
decision is recorded as the recipient's `email:<address>` user.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from dashboard.pages import review_facts
from dashboard.security import permissions
from dashboard.security.permissions import authorize
from workflows.models import ReviewItem, ReviewStatus
from workflows.operators import review
from workflows.triggers import action_links

NOTE_LIMIT = 500


def review_action(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = action_links.read(token)
    except action_links.LinkInvalid as exc:
        return render(request, "review/act.html", {"problem": str(exc)}, status=400)
    if link.recipient:
        return emailed_action(request, link)
    return logged_in_action(request, link)


def item_for(link: action_links.ActionLink) -> ReviewItem | None:
    found: ReviewItem | None = ReviewItem.objects.select_related("instance__version__definition", "decided_by").filter(
        pk=link.item_id).first()
    return found


def page_context(item: ReviewItem, action: str, refused: str | None) -> dict[str, Any]:
    context: dict[str, Any] = {"item": item, "action": action, "why": review_facts.why(item, item.instance),
                               "decided_label": review_facts.decision_label(item), "refusal": refused}
    declared = sorted((item.details or {}).get("inputs") or {}) if item.reason == "human_task" else []
    if action == "approve" and declared:
        # The task's form fields apply: they are answered on the item's page, not skipped by a link.
        context["needs_form"] = declared
    return context


@authorize(permissions.VIEW_REVIEWS, permissions.VIEW_INSTANCES)
def logged_in_action(request: HttpRequest, link: action_links.ActionLink) -> HttpResponse:
    item = item_for(link)
    if item is None:
        return render(request, "review/act.html", {"problem": "this review item no longer exists"}, status=404)
    if link.action == "open":
        return redirect("review-detail", item_id=item.pk)
    context = page_context(item, link.action, review.refusal(request.user, item))
    if request.method == "POST" and context["refusal"] is not None:
        raise PermissionDenied(context["refusal"])
    return confirm(request, item, link, context, request.user, authorized=False)


def emailed_action(request: HttpRequest, link: action_links.ActionLink) -> HttpResponse:
    item = item_for(link)
    if item is None:
        return render(request, "review/act.html", {"problem": "this review item no longer exists"}, status=404)
    refused = action_links.emailed_refusal(link, item.assignee_group)
    context = {**page_context(item, link.action, refused), "emailed": link.recipient}
    if refused is not None:
        return render(request, "review/act.html", context, status=403)
    approver = action_links.approver_user(link.recipient) if request.method == "POST" else None
    return confirm(request, item, link, context, approver, authorized=True)


def confirm(request: HttpRequest, item: ReviewItem, link: action_links.ActionLink, context: dict[str, Any],
            user: Any, *, authorized: bool) -> HttpResponse:
    """The confirm page (GET), or the decision (POST) as `user`."""
    if item.status != ReviewStatus.OPEN:
        return render(request, "review/act.html", {**context, "decided": True}, status=409)
    if request.method != "POST":
        return render(request, "review/act.html", context)
    note = (request.POST.get("note") or "").strip()[:NOTE_LIMIT]
    try:
        decided = review.decide(item.pk, user, review.Decision(
            action=link.action, note=note or f"{link.action} (from a notice's link)"), authorized=authorized)
    except review.ReviewConflict:
        item.refresh_from_db()
        return render(request, "review/act.html", {**context, "item": item, "decided": True,
                                                   "decided_label": review_facts.decision_label(item)}, status=409)
    except review.ReviewError as exc:  # the task's form wants answers, four eyes, a wrong kind of item
        return render(request, "review/act.html", {**context, "problem": str(exc), "needs_form": None}, status=400)
    if authorized:  # an emailed approver has no page to go on to
        return render(request, "review/act.html", {**context, "item": decided, "done": True,
                                                   "decided_label": review_facts.decision_label(decided)})
    messages.success(request, f"Item #{decided.pk}: {review_facts.decision_label(decided)}")
    return redirect("review-detail", item_id=decided.pk)
