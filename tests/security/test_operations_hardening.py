"""Issue 19, item 17: `rotate_credentials` is atomic and locked (a failure changes nothing; an edit made
meanwhile is not overwritten); `dumpdata` never exports a secret in clear; a provider credential's URL
is https unless DEBUG; the /metrics token has a minimum length and its failures are throttled."""

from __future__ import annotations

import io
import sys
import threading
import time
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection, transaction
from django.test import Client

from tests.security.test_production_settings import ROOT
from tests.support.forkserver import python_run
from workflows.credentials import store as credentials
from workflows.models import Credential
from workflows.triggers.models import Webhook

OLD_KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()


def planted(name: str, value: str) -> Credential:
    credential = Credential(name=name)
    credential.set_value(value)
    credential.save()
    return credential


@pytest.fixture
def old_key(settings: Any) -> Any:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CREDENTIALS_KEYS": [OLD_KEY]}
    return settings


def rotate_to_new_key(settings: Any) -> None:
    settings.STEADYFLOW = {**settings.STEADYFLOW, "CREDENTIALS_KEYS": [NEW_KEY, OLD_KEY]}


def test_a_rotation_that_fails_changes_nothing(db: None, old_key: Any) -> None:
    first, second = planted("a", "value-a"), planted("b", "value-b")
    Credential.objects.filter(pk=second.pk).update(encrypted_value="not-a-fernet-token")
    before = dict(Credential.objects.values_list("name", "encrypted_value"))
    rotate_to_new_key(old_key)
    with pytest.raises(Exception):  # noqa: B017, PT011 - whichever error the broken row raises
        credentials.rotate()
    assert dict(Credential.objects.values_list("name", "encrypted_value")) == before
    assert first.pk


@pytest.mark.django_db(transaction=True)
def test_an_edit_during_a_rotation_is_not_overwritten(old_key: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL (SQLite serialises every write)")
    credential = planted("a", "before")
    rotate_to_new_key(old_key)
    editing, edited = threading.Event(), threading.Event()

    def edit() -> None:
        try:
            with transaction.atomic():
                row = Credential.objects.select_for_update().get(pk=credential.pk)
                editing.set()
                time.sleep(1.0)  # the rotation starts meanwhile
                row.set_value("after")
                row.save()
        finally:
            connection.close()
            edited.set()

    thread = threading.Thread(target=edit)
    thread.start()
    assert editing.wait(10)
    credentials.rotate()
    thread.join()
    assert edited.is_set()
    row = Credential.objects.get(pk=credential.pk)
    assert credentials.decrypt(row.encrypted_value) == "after"
    assert Fernet(NEW_KEY.encode()).decrypt(row.encrypted_value.encode()) == b"after"


def test_dumpdata_never_exports_a_secret_in_clear(db: None, make_version: Any) -> None:
    from tests.conftest import chain

    version = make_version(chain({"id": "work", "type": "python", "config": {"function": "noop"}}), "dumped")
    hook = Webhook.objects.create(definition=version.definition)
    planted("crm", "credential-value-in-clear")
    out = io.StringIO()
    call_command("dumpdata", "workflows", stdout=out)
    dumped = out.getvalue()
    assert hook.secret not in dumped and "credential-value-in-clear" not in dumped
    # ...and what it exports loads back to the same secret.
    Webhook.objects.all().delete()
    path = ROOT / "var" / "dump-test.json"
    path.parent.mkdir(exist_ok=True)
    try:
        path.write_text(dumped)
        call_command("loaddata", str(path), verbosity=0)
    finally:
        path.unlink()
    assert Webhook.objects.get(pk=hook.pk).secret == hook.secret


def test_a_provider_credential_url_must_be_https_unless_debug(settings: Any) -> None:
    settings.DEBUG = False
    with pytest.raises(credentials.CredentialError) as refused:
        credentials.clean_fields("team", "llm_provider", "http://llm.example.com/v1", "")
    assert "https" in str(refused.value)
    assert credentials.clean_fields("team", "llm_provider", "https://llm.example.com/v1", "") == []
    settings.DEBUG = True
    assert credentials.clean_fields("team", "llm_provider", "http://127.0.0.1:8080/v1", "") == []


def test_a_short_metrics_token_refuses_to_start() -> None:
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "dashboard.settings", "DEBUG": "0",
           "SECRET_KEY": "x" * 50, "STEADYFLOW_CREDENTIALS_KEY": OLD_KEY, "STEADYFLOW_METRICS_TOKEN": "short"}
    done = python_run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "STEADYFLOW_METRICS_TOKEN" in done.stderr and "24" in done.stderr


def test_metrics_token_failures_are_throttled(db: None, redis_conn: Any, settings: Any) -> None:
    settings.METRICS_TOKEN = "m" * 32
    client = Client(REMOTE_ADDR="203.0.113.217")
    answers = [client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer guess-{n}").status_code for n in range(12)]
    assert answers[:10] == [401] * 10 and answers[10:] == [429, 429]
    # Even the right token waits out the window from that address...
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {'m' * 32}").status_code == 429
    # ...but another address is heard.
    other = Client(REMOTE_ADDR="198.51.100.217")
    assert other.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {'m' * 32}").status_code == 200


def test_the_production_doc_says_which_proxy_headers_daphne_may_trust() -> None:
    text = (ROOT / "docs" / "production-and-scaling.md").read_text()
    for needed in ("--proxy-headers", "X-Forwarded-For", "X-Forwarded-Port", "STEADYFLOW_PROXY_SSL_HEADER",
                   "X-Forwarded-Proto", "REMOTE_ADDR"):
        assert needed in text, needed
