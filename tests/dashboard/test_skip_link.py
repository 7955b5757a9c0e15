"""Every page of ours starts with a skip link to its main content (issue 22, accessibility)."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/accounts/login/", "/workflows/", "/instances/", "/review/", "/"])
def test_pages_start_with_a_skip_link_to_main(path: str, user_in: object) -> None:
    client = Client()
    if path != "/accounts/login/":
        client.force_login(user_in("operators", "olga"))  # type: ignore[operator]
    html = client.get(path).content.decode()
    body = html[html.index("<body"):]
    assert body.index('class="skip-link" href="#main"') < body.index("<header")
    assert '<main id="main"' in html
