"""Issue 19, item 13: a page that shows a new token or webhook secret is `Cache-Control: no-store` and
the plaintext is never kept in the session (it is shown in the POST's own answer); a refused token is
logged (never its secret); admins list and revoke any user's tokens."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.test import Client

from dashboard.models import ApiToken
from dashboard.security import tokens
from workflows.triggers.models import Webhook


def sessions_text() -> str:
    return repr([s.get_decoded() for s in Session.objects.all()])


def test_a_new_token_is_shown_in_the_answer_no_store_and_never_in_the_session(admin_client_: Client) -> None:
    response = admin_client_.post("/account/tokens/", {"name": "ci", "scopes": ["read"], "expires_in_days": "30"})
    assert response.status_code == 200, response.status_code
    assert "no-store" in response["Cache-Control"]
    plaintext = response.context["shown"]["token"]
    assert plaintext.startswith("sf_") and plaintext in response.content.decode()
    assert plaintext.split("_")[-1] not in sessions_text()
    # The next view of the page shows it no more.
    assert plaintext not in admin_client_.get("/account/tokens/").content.decode()


def test_a_new_webhook_secret_is_shown_no_store_and_never_in_the_session(admin_client_: Client,
                                                                         version: Any) -> None:
    response = admin_client_.post(f"/workflows/{version.definition.slug}/triggers/",
                                  {"action": "add_webhook", "name": "orders"})
    assert response.status_code == 200, response.status_code
    assert "no-store" in response["Cache-Control"]
    secret = Webhook.objects.get().secret
    assert secret in response.content.decode()
    assert secret not in sessions_text()
    hook = Webhook.objects.get()
    rotated = admin_client_.post(f"/workflows/{version.definition.slug}/triggers/",
                                 {"action": "rotate_webhook", "id": hook.pk})
    hook.refresh_from_db()
    assert rotated.status_code == 200 and hook.secret in rotated.content.decode()
    assert "no-store" in rotated["Cache-Control"] and hook.secret not in sessions_text()


def test_refused_tokens_are_logged_without_their_secret(db: None, redis_conn: Any,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    user = User.objects.create_superuser("dora", password=None)
    issued = tokens.issue(user, "t", ["read"])
    forged = issued.plaintext[:-4] + "XXXX"
    with caplog.at_level(logging.INFO, logger="steadyflow"):
        answer = Client(HTTP_AUTHORIZATION=f"Bearer {forged}").get("/api/v1/instances")
    assert answer.status_code == 401
    lines = [r for r in caplog.records if "token refused" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno >= logging.WARNING
    text = lines[0].getMessage() + repr(lines[0].__dict__)
    assert issued.token.key in text and "invalid token" in text
    # The secret is everything after "sf_<key>_" (it may itself hold "_": splitting on the last one made a
    # test that failed when the tail was a short string such as "8" that any log record contains).
    def secret(token: str) -> str:
        return token[len(tokens.PREFIX):].partition("_")[2]

    assert secret(forged) not in text and secret(issued.plaintext) not in text


def test_admins_list_and_revoke_any_users_tokens(admin_client_: Client) -> None:
    issued = tokens.issue(User.objects.create_superuser("erin2", password=None), "erins-laptop", ["read"])
    listing = admin_client_.get("/admin/dashboard/apitoken/")
    assert listing.status_code == 200 and "erins-laptop" in listing.content.decode()
    assert issued.token.digest not in listing.content.decode()
    done = admin_client_.post("/admin/dashboard/apitoken/", {
        "action": "revoke_tokens", "_selected_action": [issued.token.pk]})
    assert done.status_code == 302
    assert ApiToken.objects.get(pk=issued.token.pk).revoked_at is not None
    with pytest.raises(tokens.TokenRefused):
        tokens.authenticate(issued.plaintext)
