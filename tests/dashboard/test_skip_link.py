"""Every page of ours starts with a skip link to its main content, and no plain div or span carries an
aria-label (issue 22, accessibility; the browser suite's axe-core check is tests/e2e/test_accessibility.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", ["/accounts/login/", "/workflows/", "/instances/", "/review/", "/"])
def test_pages_start_with_a_skip_link_to_main(path: str, user_in: object) -> None:
    client = Client()
    if path != "/accounts/login/":
        client.force_login(user_in("operators", "olga"))  # type: ignore[operator]
    html = client.get(path).content.decode()
    body = html[html.index("<body"):]
    assert body.index('class="skip-link" href="#main"') < body.index("<header")
    assert '<main id="main"' in html


# An aria-label on an element with no role (a plain div or span) is not read by screen readers, and
# axe-core reports it as serious (aria-prohibited-attr): give the element a role or drop the label.
PLAIN_LABELLED = re.compile(r"<(div|span)\b(?![^>]*\brole=)[^>]*\baria-label=")
PLAIN_LABELLED_JS = re.compile(r"""el\(\s*["'](div|span)["']\s*,\s*\{(?![^}]*\brole:)[^}]*["']aria-label["']""")


def test_no_aria_label_on_a_plain_div_or_span() -> None:
    found = [f"{path.relative_to(ROOT)}: {match.group(0)}"
             for path in sorted((ROOT / "templates").rglob("*.html"))
             for match in PLAIN_LABELLED.finditer(path.read_text())]
    found += [f"{path.relative_to(ROOT)}: {match.group(0)}"
              for path in sorted((ROOT / "static" / "js").rglob("*.js"))
              for match in PLAIN_LABELLED_JS.finditer(path.read_text())]
    assert found == [], found
