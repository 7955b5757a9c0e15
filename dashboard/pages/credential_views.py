"""The credentials page: designers list, add, replace and delete credentials. Values are write-only:
no page, response or log ever shows one after it is saved (workflows/credentials/store.py)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.security.permissions import authorize, refusal
from workflows.credentials.forms import CredentialForm
from workflows.models import Credential

VIEW = "workflows.view_credential"
ADD = "workflows.add_credential"
CHANGE = "workflows.change_credential"
DELETE = "workflows.delete_credential"


def _save(request: HttpRequest, form: CredentialForm) -> Credential:
    credential = form.save(commit=False)
    credential.updated_at = timezone.now()
    credential.updated_by = request.user
    credential.save()
    return credential


@authorize(VIEW)
def credential_list(request: HttpRequest) -> HttpResponse:
    form = CredentialForm()
    if request.method == "POST":
        denied = refusal(request.user, ADD)
        if denied:
            raise PermissionDenied(denied)
        form = CredentialForm(request.POST)
        if form.is_valid():
            credential = _save(request, form)
            messages.success(request, f"Credential {credential.name} saved.")
            return redirect("credential-list")
    return render(request, "dashboard/credentials.html", {
        "credentials": Credential.objects.select_related("updated_by"),
        "form": form,
        "can_add": request.user.has_perm(ADD),
        "can_change": request.user.has_perm(CHANGE),
        "can_delete": request.user.has_perm(DELETE),
    }, status=400 if form.errors else 200)


@authorize(VIEW, CHANGE)
def credential_edit(request: HttpRequest, name: str) -> HttpResponse:
    credential = get_object_or_404(Credential, name=name)
    form = CredentialForm(instance=credential)
    if request.method == "POST":
        form = CredentialForm(request.POST, instance=credential)
        if form.is_valid():
            saved = _save(request, form)
            messages.success(request, f"Credential {saved.name} saved.")
            return redirect("credential-list")
    return render(request, "dashboard/credential_edit.html", {"credential": credential, "form": form},
                  status=400 if form.errors else 200)


@require_POST
@authorize(VIEW, DELETE)
def credential_delete(request: HttpRequest, name: str) -> HttpResponse:
    credential = get_object_or_404(Credential, name=name)
    credential.delete()
    messages.success(request, f"Credential {name} deleted. Graphs that reference it fail at that step.")
    return redirect("credential-list")
