"""Changing where a credential is sent requires its value again (issue 19, item 7).

Editing a provider credential used to keep its stored key when its base URL or kind changed, so a
designer could point an admin's LLM key at their own server. Now the form (the page and the admin)
answers 400 on the value field, and the model refuses the save whatever path it comes by.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from workflows.credentials import store as credentials
from workflows.models import Credential

KEY = "sk-admins-key-0f9e8d7c"  # noqa: S105 - a test value


@pytest.fixture
def provider(db: None) -> Credential:
    credential = Credential(name="team_llm", kind="llm_provider", base_url="https://api.openai.com/v1",
                            allowed_models=["gpt-4o-mini"])
    credential.set_value(KEY)
    credential.save()
    return credential


def edit(client: Client, **fields: str) -> Any:
    data = {"name": "team_llm", "kind": "llm_provider", "base_url": "https://api.openai.com/v1",
            "allowed_models_text": "gpt-4o-mini", "value": "", **fields}
    return client.post("/credentials/team_llm/", data)


@pytest.mark.parametrize("change", [{"base_url": "https://attacker.example/v1"},
                                    {"base_url": "https://api.openai.com/v2"},
                                    {"kind": "secret", "base_url": ""}])
def test_changing_where_it_goes_without_the_value_is_refused(provider: Credential, user_in: Callable[..., Any],
                                                             change: dict[str, str]) -> None:
    client = Client()
    client.force_login(user_in("designers"))
    response = edit(client, **change)
    assert response.status_code == 400
    assert "enter the value again" in response.content.decode()
    stored = Credential.objects.get(name="team_llm")
    assert stored.base_url == "https://api.openai.com/v1" and stored.kind == "llm_provider"
    assert credentials.decrypt(stored.encrypted_value) == KEY


def test_with_the_value_re_entered_the_change_is_saved(provider: Credential, user_in: Callable[..., Any]) -> None:
    client = Client()
    client.force_login(user_in("designers"))
    assert edit(client, base_url="https://llm.example.com/v1", value="sk-new-key-1234").status_code == 302
    stored = Credential.objects.get(name="team_llm")
    assert stored.base_url == "https://llm.example.com/v1"
    assert credentials.decrypt(stored.encrypted_value) == "sk-new-key-1234"
    # Other edits (models, description) keep the stored value as before.
    assert edit(client, base_url="https://llm.example.com/v1", allowed_models_text="m1",
                description="d").status_code == 302
    assert credentials.decrypt(Credential.objects.get(name="team_llm").encrypted_value) == "sk-new-key-1234"


def test_the_admin_form_refuses_it_too(provider: Credential, django_user_model: Any) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root"))
    response = client.post(f"/admin/workflows/credential/{provider.pk}/change/", {
        "name": "team_llm", "kind": "llm_provider", "base_url": "https://attacker.example/v1",
        "allowed_models_text": "", "value": "", "description": ""})
    assert response.status_code == 200 and "enter the value again" in response.content.decode()
    assert Credential.objects.get(pk=provider.pk).base_url == "https://api.openai.com/v1"


def test_the_model_refuses_any_other_path(provider: Credential) -> None:
    loaded = Credential.objects.get(pk=provider.pk)
    loaded.base_url = "https://attacker.example/v1"
    with pytest.raises(credentials.CredentialError, match="enter the value again"):
        loaded.save()
    loaded.set_value("a-new-value")
    loaded.save()
    # Re-encryption under a new key (rotate_credentials) changes nothing about the destination: allowed.
    assert credentials.rotate() >= 1
