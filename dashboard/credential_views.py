"""The credentials page: designers list, add, replace and delete credentials. Values are write-only:
no page, response or log ever shows one after it is saved (workflows/credentials.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from workflows.credential_forms import CredentialForm
from workflows.models import Credential


def _require(request: HttpRequest, action: str) -> None:
    if not request.user.has_perm(f"workflows.{action}_credential"):
        raise PermissionDenied(f"you need the {action}_credential permission (the designers group)")


def _save(request: HttpRequest, form: CredentialForm) -> Credential:
    credential = form.save(commit=False)
    credential.updated_at = timezone.now()
    credential.updated_by = request.user
    credential.save()
    return credential


@login_required
def credential_list(request: HttpRequest) -> HttpResponse:
    _require(request, "view")
    form = CredentialForm()
    if request.method == "POST":
        _require(request, "add")
        form = CredentialForm(request.POST)
        if form.is_valid():
            credential = _save(request, form)
            messages.success(request, f"Credential {credential.name} saved.")
            return redirect("credential-list")
    return render(request, "dashboard/credentials.html", {
        "credentials": Credential.objects.select_related("updated_by"),
        "form": form,
        "can_add": request.user.has_perm("workflows.add_credential"),
        "can_change": request.user.has_perm("workflows.change_credential"),
        "can_delete": request.user.has_perm("workflows.delete_credential"),
    }, status=400 if form.errors else 200)


@login_required
def credential_edit(request: HttpRequest, name: str) -> HttpResponse:
    _require(request, "change")
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


@login_required
@require_POST
def credential_delete(request: HttpRequest, name: str) -> HttpResponse:
    _require(request, "delete")
    credential = get_object_or_404(Credential, name=name)
    credential.delete()
    messages.success(request, f"Credential {name} deleted. Graphs that reference it fail at that step.")
    return redirect("credential-list")
