"""Login throttling on the site's login page and the admin's, per account and per address: after the
limit the right password is refused too, with a message saying why, and the lock is audited."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from dashboard.models import LoginFailure, SecurityEvent

PASSWORD = "correct horse battery staple"
SITE = "/accounts/login/"
ADMIN = "/admin/login/"


@pytest.fixture(autouse=True)
def _limits(settings: Any) -> None:
    settings.LOGIN_THROTTLE = {"MAX_FAILURES_PER_ACCOUNT": 5, "MAX_FAILURES_PER_ADDRESS": 8, "WINDOW_S": 900}
    # The hasher's cost is beside the point here (it also runs for unknown users).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def dana(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("dana", password=PASSWORD)


@pytest.fixture
def root(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("root", password=PASSWORD)


def attempt(client: Client, url: str, username: str, password: str, address: str = "10.0.0.1") -> Any:
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("url", [SITE, ADMIN])
def test_an_account_is_locked_after_five_failures_and_the_right_password_is_refused(
        db: None, dana: Any, root: Any, url: str) -> None:
    user = root if url == ADMIN else dana
    client = Client()
    for _ in range(4):
        response = attempt(client, url, user.username, "wrong")
        assert response.status_code == 200 and not logged_in(client)
        assert "Too many failed logins" not in response.content.decode()
    # The fifth failure starts the lock, and the form says so at once.
    response = attempt(client, url, user.username, "wrong")
    assert "Too many failed logins for this account" in response.content.decode()
    assert SecurityEvent.objects.filter(action="login_locked", username=user.username).count() == 1

    response = attempt(client, url, user.username.upper(), PASSWORD)  # the username's case does not matter
    assert response.status_code == 200 and not logged_in(client)
    text = response.content.decode()
    assert "Too many failed logins for this account" in text and "15 more minutes" in text
    refused = SecurityEvent.objects.get(action="login_refused")
    assert refused.username == user.username and refused.address == "10.0.0.1"
    assert refused.details["scope"] == "account"
    # A refused attempt does not count as a failure: it must not extend the lock.
    assert LoginFailure.objects.filter(username=user.username).count() == 5


def test_the_lock_lifts_when_the_failures_leave_the_window(db: None, dana: Any) -> None:
    client = Client()
    for _ in range(5):
        attempt(client, SITE, "dana", "wrong")
    assert not logged_in(client) and authenticate(None, username="dana", password=PASSWORD) is None
    LoginFailure.objects.update(created_at=timezone.now() - timedelta(seconds=901))
    response = attempt(client, SITE, "dana", PASSWORD)
    assert response.status_code == 302 and logged_in(client)


def test_a_successful_login_clears_the_accounts_failures(db: None, dana: Any) -> None:
    client = Client()
    for _ in range(4):
        attempt(client, SITE, "dana", "wrong")
    assert attempt(client, SITE, "dana", PASSWORD).status_code == 302
    client.logout()
    assert not LoginFailure.objects.filter(username="dana").exists()
    for _ in range(4):
        attempt(client, SITE, "dana", "wrong")
    assert attempt(client, SITE, "dana", PASSWORD).status_code == 302


def test_an_address_is_locked_after_failures_across_many_accounts(db: None, dana: Any) -> None:
    client = Client()
    for i in range(8):
        attempt(client, SITE, f"guess{i}", "wrong", address="203.0.113.7")
    response = attempt(client, SITE, "dana", PASSWORD, address="203.0.113.7")
    assert not logged_in(client)
    assert "Too many failed logins for your address" in response.content.decode()
    assert SecurityEvent.objects.filter(action="login_locked", address="203.0.113.7").exists()
    # Another address is not affected, and dana's own account never failed.
    other = Client()
    assert attempt(other, SITE, "dana", PASSWORD, address="198.51.100.1").status_code == 302


def test_the_admin_and_the_site_share_one_count(db: None, root: Any) -> None:
    client = Client()
    for _ in range(3):
        attempt(client, SITE, "root", "wrong")
    for _ in range(2):
        attempt(client, ADMIN, "root", "wrong")
    response = attempt(client, ADMIN, "root", PASSWORD)
    assert "Too many failed logins" in response.content.decode() and not logged_in(client)


def test_the_security_events_are_listed_in_the_admin(db: None, root: Any) -> None:
    for _ in range(5):
        attempt(Client(), SITE, "someone", "wrong")
    client = Client()
    client.force_login(root)
    page = client.get("/admin/dashboard/securityevent/")
    assert page.status_code == 200 and "login_locked" in page.content.decode()


@pytest.mark.parametrize("password", ["password123", "12345678901234", "dana-dana-dana", "short"])
def test_djangos_standard_password_validators_refuse_weak_passwords(django_user_model: Any, db: None,
                                                                     password: str) -> None:
    user = django_user_model(username="dana-dana-dana")
    with pytest.raises(ValidationError):
        validate_password(password, user)
    validate_password("violet tractor sings at noon", user)
