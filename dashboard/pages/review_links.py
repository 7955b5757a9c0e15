"""The page a notice's approve / reject / open link leads to (workflows/triggers/action_links.py).

It shows what is being decided and asks to confirm: a link in an email can be opened by a mail
scanner or a preview, so a GET never decides anything; only the POST of this page does, as the
logged-in user, through the same review.decide as the inbox (permissions, assignee group, the
human task's form fields, four eyes). Login comes first (the authorize decorator sends the
approver to log in and back here).
"""

from __future__ import annotations

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


@authorize(permissions.VIEW_REVIEWS, permissions.VIEW_INSTANCES)
def review_action(request: HttpRequest, token: str) -> HttpResponse:
    try:
        link = action_links.read(token)
    except action_links.LinkInvalid as exc:
        return render(request, "review/act.html", {"problem": str(exc)}, status=400)
    item = ReviewItem.objects.select_related("instance__version__definition", "decided_by").filter(
        pk=link.item_id).first()
    if item is None:
        return render(request, "review/act.html", {"problem": "this review item no longer exists"}, status=404)
    if link.action == "open":
        return redirect("review-detail", item_id=item.pk)
    context = {"item": item, "action": link.action, "why": review_facts.why(item, item.instance),
               "decided_label": review_facts.decision_label(item), "refusal": review.refusal(request.user, item)}
    declared = sorted((item.details or {}).get("inputs") or {}) if item.reason == "human_task" else []
    if link.action == "approve" and declared and request.method != "POST":
        # The task's form fields apply: they are answered on the item's page, not skipped by a link.
        context["needs_form"] = declared
    if item.status != ReviewStatus.OPEN:
        return render(request, "review/act.html", {**context, "decided": True}, status=409)
    if request.method != "POST":
        return render(request, "review/act.html", context)
    if context["refusal"] is not None:
        raise PermissionDenied(context["refusal"])
    note = (request.POST.get("note") or "").strip()[:NOTE_LIMIT]
    try:
        decided = review.decide(item.pk, request.user, review.Decision(
            action=link.action, note=note or f"{link.action} (from a notice's link)"))
    except review.ReviewConflict:
        item.refresh_from_db()
        return render(request, "review/act.html", {**context, "item": item, "decided": True,
                                                   "decided_label": review_facts.decision_label(item)}, status=409)
    except review.ReviewError as exc:  # the task's form wants answers, four eyes, a wrong kind of item
        return render(request, "review/act.html", {**context, "problem": str(exc)}, status=400)
    messages.success(request, f"Item #{decided.pk}: {review_facts.decision_label(decided)}")
    return redirect("review-detail", item_id=decided.pk)
