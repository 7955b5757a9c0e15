"""The API tokens page (user menu → API tokens): make a token (name, scopes, expiry; shown once), see
yours with their last use, revoke one. Any logged-in user may manage their own tokens; what a token can
do is bounded by its scopes and its user's permissions (dashboard/security/tokens.py)."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.models import ApiToken
from dashboard.security import tokens

EXPIRY_CHOICES = [("30", "30 days"), ("90", "90 days"), ("365", "1 year"), ("", "never")]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What uses it, e.g. deploy bot.")
    scopes = forms.MultipleChoiceField(
        choices=[(s, s) for s in tokens.SCOPES], widget=forms.CheckboxSelectMultiple,
        help_text="read: workflows, instances, reviews, breakers · run: start instances (and cancel your own) · "
                  "operate: cancel, retry, rerun, decide reviews, reset breakers · design: save workflow versions")
    expires_in_days = forms.ChoiceField(choices=EXPIRY_CHOICES, required=False, initial="90", label="Expires")

    def __init__(self, *args: object, user: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        allowed = tokens.scopes_for(user)
        self.fields["scopes"].choices = [(s, s) for s in allowed]


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        days = form.cleaned_data["expires_in_days"]
        expires = timezone.now() + timedelta(days=int(days)) if days else None
        try:
            issued = tokens.issue(request.user, form.cleaned_data["name"], form.cleaned_data["scopes"], expires)
        except ValueError as exc:
            form.add_error("scopes", str(exc))
        else:
            # Shown in this answer only (no-store), never kept in the session: after it only the token's
            # sha256 is left anywhere. A reload asks the browser to send the form again.
            return _page(request, TokenForm(user=request.user), {"name": issued.token.name,
                                                                "token": issued.plaintext})
    return _page(request, form, None)


def _page(request: HttpRequest, form: TokenForm, shown: dict[str, str] | None) -> HttpResponse:
    rows = ApiToken.objects.filter(user=request.user).order_by("-created_at")
    response = render(request, "dashboard/tokens.html", {
        "form": form, "shown": shown, "tokens": rows, "now": timezone.now(), "scopes": tokens.SCOPES,
        "rate": tokens.rate_limit()})
    response["Cache-Control"] = "no-store"  # the page may hold a token: no cache may keep it
    return response


@login_required
@require_POST
def revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    token = ApiToken.objects.filter(pk=token_id, user=request.user).first()
    if token is None:
        raise Http404("no such token of yours")
    tokens.revoke(token)
    messages.success(request, f"Token “{token.name}” revoked")
    return redirect("api-tokens")
