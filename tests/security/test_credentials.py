"""The credentials store: encrypted at rest, rotated, managed by designers only, write-only on every
page, referenced by name and checked at save (tests/security/test_credentials_canary.py runs them)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.test import Client

from workflows.adapters.breakers import provider_key
from workflows.authoring.definitions import save_version
from workflows.credentials import store as credentials
from workflows.engine.errors import GraphInvalid
from workflows.engine.secrets import ProviderAccount
from workflows.models import Credential

VALUE = "s3cret-value-6e1f0b"  # noqa: S105 - a test value


def planted(name: str = "crm_token", value: str = VALUE, **fields: Any) -> Credential:
    credential = Credential(name=name, **fields)
    credential.set_value(value)
    credential.save()
    return credential


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_values_are_encrypted_at_rest_and_rotate(db: None, settings: Any) -> None:
    credential = planted()
    assert VALUE not in credential.encrypted_value
    assert credentials.decrypt(Credential.objects.get(pk=credential.pk).encrypted_value) == VALUE
    old = list(settings.STEADYFLOW["CREDENTIALS_KEYS"])
    new = Fernet.generate_key().decode()
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CREDENTIALS_KEYS": [new, *old]}
    out = io.StringIO()
    call_command("rotate_credentials", stdout=out)
    assert "re-encrypted 1 credential(s)" in out.getvalue()
    # The old key can go: the value now decrypts with the new one alone.
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CREDENTIALS_KEYS": [new]}
    assert credentials.decrypt(Credential.objects.get(pk=credential.pk).encrypted_value) == VALUE
    # A key that never encrypted it cannot read it, and says which setting to fix (no token, no value).
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CREDENTIALS_KEYS": [Fernet.generate_key().decode()]}
    with pytest.raises(Exception, match="STEADYFLOW_CREDENTIALS_KEY") as caught:
        credentials.decrypt(Credential.objects.get(pk=credential.pk).encrypted_value)
    assert VALUE not in str(caught.value)


def test_viewers_and_operators_cannot_see_the_page_and_anonymous_users_log_in(
        user_in: Callable[..., Any], client: Client) -> None:
    planted()
    assert client.get("/credentials/").status_code == 302
    for role in ("viewers", "operators"):
        user = login(user_in(role))
        assert user.get("/credentials/").status_code == 403
        assert user.post("/credentials/", {"name": "x", "kind": "secret", "value": "v"}).status_code == 403
        replace = {"name": "crm_token", "kind": "secret", "value": "v"}
        assert user.post("/credentials/crm_token/", replace).status_code == 403
        assert user.post("/credentials/crm_token/delete").status_code == 403
    assert credentials.decrypt(Credential.objects.get().encrypted_value) == VALUE
    assert Credential.objects.count() == 1


def test_designers_add_replace_and_delete_and_never_see_a_value_again(user_in: Callable[..., Any]) -> None:
    designer = login(user_in("designers"))
    response = designer.post("/credentials/", {"name": "crm_token", "kind": "secret", "value": VALUE,
                                               "description": "the CRM"})
    assert response.status_code == 302
    listing = designer.get("/credentials/").content.decode()
    assert "crm_token" in listing and "the CRM" in listing and VALUE not in listing
    edit = designer.get("/credentials/crm_token/").content.decode()
    assert VALUE not in edit and 'type="password"' in edit
    # An empty value keeps the stored one; a new value replaces it.
    assert designer.post("/credentials/crm_token/", {"name": "crm_token", "kind": "secret", "value": "",
                                                     "description": "renamed"}).status_code == 302
    assert credentials.decrypt(Credential.objects.get().encrypted_value) == VALUE
    assert designer.post("/credentials/crm_token/", {"name": "crm_token", "kind": "secret",
                                                     "value": "replaced-value"}).status_code == 302
    assert credentials.decrypt(Credential.objects.get().encrypted_value) == "replaced-value"
    # Bad input: a 400 naming the field, nothing saved.
    bad = designer.post("/credentials/", {"name": "no spaces", "kind": "secret", "value": "v"})
    assert bad.status_code == 400 and "letters, digits" in bad.content.decode()
    bad = designer.post("/credentials/", {"name": "nokey", "kind": "secret", "value": ""})
    assert bad.status_code == 400 and "needs a value" in bad.content.decode()
    bad = designer.post("/credentials/", {"name": "p", "kind": "llm_provider", "value": "k", "base_url": ""})
    assert bad.status_code == 400 and "base_url" in bad.content.decode().replace("Base URL", "base_url")
    assert designer.post("/credentials/crm_token/delete").status_code == 302
    assert Credential.objects.count() == 0


def test_the_admin_is_write_only_too(db: None, django_user_model: Any) -> None:
    root = login(django_user_model.objects.create_superuser("root", password="correct horse battery staple"))
    response = root.post("/admin/workflows/credential/add/", {
        "name": "team-a", "kind": "llm_provider", "value": VALUE, "base_url": "https://llm.example.com/v1",
        "allowed_models_text": "m1, m2", "description": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    credential = Credential.objects.get()
    assert credential.allowed_models == ["m1", "m2"] and credentials.decrypt(credential.encrypted_value) == VALUE
    for path in ("/admin/workflows/credential/", f"/admin/workflows/credential/{credential.pk}/change/",
                 f"/admin/workflows/credential/{credential.pk}/history/"):
        page = root.get(path)
        assert page.status_code == 200 and VALUE not in page.content.decode()


def chain(node: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": [{"id": "start", "type": "start"}, node, {"id": "end", "type": "end"}],
            "edges": [{"source": "start", "target": node["id"]}, {"source": node["id"], "target": "end"}]}


def test_references_are_checked_at_save_naming_the_node(db: None, admin_client_: Client) -> None:
    node = {"id": "call", "type": "http", "config": {"url": "https://crm.example.com/?k={{ secrets.crm_token }}"}}
    with pytest.raises(GraphInvalid, match="node 'call': credential 'crm_token' does not exist"):
        save_version("refs", chain(node))
    response = admin_client_.post("/api/validate", {"graph": chain(node)}, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["errors"][0]["node"] == "call"
    planted()
    save_version("refs", chain(node))
    condition = chain(node)
    condition["edges"][1]["when"] = "secrets.crm_token == 'x'"
    with pytest.raises(GraphInvalid, match="conditions may not read secrets"):
        save_version("refs", condition)


def test_llm_provider_credentials_name_their_models_and_bound_breaker_keys(db: None) -> None:
    planted("team-a", "k", kind="llm_provider", base_url="https://llm.example.com/v1", allowed_models=["m1"])
    ask = {"id": "ask", "type": "llm", "config": {"prompt": "hi", "credential": "team-a", "model": "m9"}}
    with pytest.raises(GraphInvalid, match="node 'ask': model 'm9' is not one credential 'team-a' allows"):
        save_version("llm-cred", chain(ask))
    ask["config"]["model"] = "m1"
    save_version("llm-cred", chain(ask))
    account = ProviderAccount(name="team-a", base_url="https://llm.example.com/v1", api_key="k", models=("m1",))
    assert provider_key({"model": "m1"}, account) == "credential:team-a:m1"
    # A model rendered from input shares one key: input cannot make breaker rows.
    assert provider_key({"model": "anything-" + "x" * 300}, account) == "credential:team-a:*"
    assert provider_key({"provider": "openai", "model": "m1"}) == "openai:*"


@pytest.mark.django_db(transaction=True)
def test_a_credential_deleted_after_save_fails_the_step_naming_it(redis_conn: Any) -> None:
    from workflows import runtime
    from workflows.models import StepRun
    from workflows.scheduler.inprocess import drain

    credential = planted()
    version = save_version("deleted", chain({"id": "call", "type": "http", "config": {
        "url": "http://127.0.0.1:9/?k={{ secrets.crm_token }}"}}))
    credential.delete()
    instance = runtime.start_instance(version, {})
    drain()
    step = StepRun.objects.get(instance=instance, node_id="call")
    assert step.status == "failed"
    assert step.error["message"] == "node 'call': credential 'crm_token' does not exist (any more)"


def test_webhook_and_channel_secrets_are_encrypted_at_rest_and_rotate(db: None, settings: Any) -> None:
    """Webhook and notification channel secrets sign HMACs, so they are kept in clear for the server
    (EncryptedTextField), never in the column."""
    from django.db import connection

    from workflows.triggers.models import NotificationChannel, Webhook

    version = save_version("hooked", chain({"id": "work", "type": "python", "config": {"function": "noop"}}))
    hook = Webhook.objects.create(definition=version.definition, name="orders")
    channel = NotificationChannel.objects.create(name="ops", kind="webhook", target="https://hooks.example.com/x")

    def column(table: str, pk: int) -> str:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT secret FROM {table} WHERE id = %s", [pk])  # noqa: S608 - fixed names
            return str(cursor.fetchone()[0])

    for table, row in (("workflows_webhook", hook), ("workflows_notificationchannel", channel)):
        stored = column(table, row.pk)
        assert row.secret.startswith("whsec_") and row.secret not in stored
        assert type(row).objects.get(pk=row.pk).secret == row.secret
    old = list(settings.STEADYFLOW["CREDENTIALS_KEYS"])
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CREDENTIALS_KEYS": [Fernet.generate_key().decode(), *old]}
    before = column("workflows_webhook", hook.pk)
    credentials.rotate()
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CREDENTIALS_KEYS": settings.STEADYFLOW["CREDENTIALS_KEYS"][:1]}
    assert column("workflows_webhook", hook.pk) != before
    assert Webhook.objects.get(pk=hook.pk).secret == hook.secret
    assert NotificationChannel.objects.get(pk=channel.pk).secret == channel.secret
