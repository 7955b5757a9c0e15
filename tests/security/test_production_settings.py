"""Production settings fail closed: checked on fresh processes (`manage.py check` with a chosen
environment), since settings are read once at start-up. Plus the headers every page carries."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tests.support.forkserver import python_run

ROOT = Path(__file__).resolve().parents[2]
# The production variables docs/security.md documents; CI runs the same check with them.
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "k" * 10 + "-production-secret-for-the-check-only-0123456789abcdef",
    "STEADYFLOW_CREDENTIALS_KEY": "Y3JlZGVudGlhbHMta2V5LWZvci10aGUtY2hlY2stMDE=",
    "ALLOWED_HOSTS": "steadyflow.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://steadyflow.example.com",
    "STEADYFLOW_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    "STEADYFLOW_HSTS_PRELOAD": "1",
}
# What the test run sets for itself (tests/settings.py) must not leak into a "production" process.
TEST_ONLY = ("SECRET_KEY", "DEBUG", "STEADYFLOW_HTTPS", "DJANGO_ALLOW_ASYNC_UNSAFE", "STEADYFLOW_CREDENTIALS_KEY")


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in TEST_ONLY}
    base["DJANGO_SETTINGS_MODULE"] = "dashboard.settings"
    return python_run([sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, capture_output=True,
                          text=True, timeout=120)


def test_without_a_secret_key_and_without_debug_nothing_starts() -> None:
    result = manage("check", DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr
    # Unset DEBUG is production too.
    assert manage("check").returncode != 0


def test_without_a_credentials_key_and_without_debug_nothing_starts() -> None:
    without = {k: v for k, v in PRODUCTION.items() if k != "STEADYFLOW_CREDENTIALS_KEY"}
    result = manage("check", **without)
    assert result.returncode != 0
    assert "STEADYFLOW_CREDENTIALS_KEY must be set when DEBUG is off" in result.stderr
    result = manage("check", **{**PRODUCTION, "STEADYFLOW_CREDENTIALS_KEY": "not-a-fernet-key"})
    assert result.returncode != 0
    assert "STEADYFLOW_CREDENTIALS_KEY: key 1 is not a Fernet key" in result.stderr


def test_development_with_debug_needs_no_secret_key() -> None:
    result = manage("check", DEBUG="1")
    assert result.returncode == 0, result.stderr


def test_check_deploy_passes_at_warning_level_with_the_documented_production_variables() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_fails_when_production_opts_out_of_https() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", **{**PRODUCTION, "STEADYFLOW_HTTPS": "0"})
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr + result.stdout


def test_the_settings_do_not_switch_off_djangos_async_safety_check() -> None:
    code = ("import os; from django.conf import settings; settings.INSTALLED_APPS; "
            "print(repr(os.environ.get('DJANGO_ALLOW_ASYNC_UNSAFE')))")
    result = manage("shell", "-c", code, **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "None"
    assert "async.E001" not in manage("check", "--deploy", **PRODUCTION).stderr


def test_production_values_of_the_hardening_settings() -> None:
    code = ("from django.conf import settings as s; print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, "
            "s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, "
            "s.SECURE_PROXY_SSL_HEADER, len(s.AUTH_PASSWORD_VALIDATORS))")
    result = manage("shell", "-c", code, **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].split() == [
        "True", "True", "True", "31536000", "True", "('HTTP_X_FORWARDED_PROTO',", "'https')", "4"]


def test_every_page_carries_the_content_security_policy_and_the_other_headers(db: None,
                                                                           django_user_model: Any) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root"))
    for url in ("/accounts/login/", "/", "/workflows/", "/instances/", "/review/", "/admin/", "/api/node-types"):
        response = client.get(url)
        assert response.status_code == 200, url
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"


def test_https_redirects_http_but_not_the_liveness_probe(db: None, settings: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    client = Client()
    response = client.get("/accounts/login/")
    assert response.status_code == 301 and response["Location"].startswith("https://")
    assert client.get("/healthz").status_code == 200
    secure = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"].startswith("max-age=31536000")


def test_no_template_holds_inline_script_or_event_handlers() -> None:
    """The CSP allows no inline script: data reaches the scripts through json_script and data attributes."""
    offenders = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            if "src=" not in tag and 'type="application/json"' not in tag:
                offenders.append(f"{path.relative_to(ROOT)}: {tag}")
        offenders += [f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r"\son[a-z]+\s*=", text)]
        offenders += [f"{path.relative_to(ROOT)}: style attribute" for _ in re.findall(r"\sstyle\s*=", text)]
    assert offenders == []


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "static" / "js").glob("*.js")))
def test_no_script_of_ours_evaluates_strings(script: str) -> None:
    text = (ROOT / "static" / "js" / script).read_text()
    assert not re.search(r"\beval\(|new Function\(|setTimeout\(\s*[\"']", text)
