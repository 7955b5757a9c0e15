"""GET /metrics: who may read it (a bearer token, an address allow-list, both, or loopback with DEBUG
only), what it serves, and the Grafana dashboard shipped in docker/ (docs/operating.md, Observability).
The scrape after a real run on real workers is in tests/workflows/test_observability.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from workflows.observability import metrics

ROOT = Path(__file__).resolve().parents[2]


def get(client: Client, *, token: str | None = None, address: str = "127.0.0.1") -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
    return client.get("/metrics", REMOTE_ADDR=address, **headers)


@pytest.fixture
def metrics_settings(settings: Any) -> Any:
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOW = []
    settings.DEBUG = False
    return settings


@pytest.mark.django_db
def test_nothing_configured_refuses_everyone_without_debug(client, metrics_settings):
    response = get(client)
    assert response.status_code == 403
    assert "STEADYFLOW_METRICS_TOKEN" in response.json()["error"]


@pytest.mark.django_db
def test_nothing_configured_serves_loopback_only_with_debug(client, metrics_settings):
    metrics_settings.DEBUG = True
    assert get(client).status_code == 200
    assert get(client, address="::1").status_code == 200
    assert get(client, address="10.0.0.5").status_code == 403


@pytest.mark.django_db
def test_a_token_is_required_when_configured(client, metrics_settings):
    metrics_settings.METRICS_TOKEN = "s3cret-token"
    missing = get(client)
    assert missing.status_code == 401 and missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert get(client, token="wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic s3cret-token").status_code == 401
    ok = get(client, token="s3cret-token", address="203.0.113.9")  # any address, with the token
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain")


@pytest.mark.django_db
def test_an_allow_list_admits_only_its_addresses(client, metrics_settings):
    metrics_settings.METRICS_ALLOW = ["10.0.0.0/8", "192.0.2.7"]
    assert get(client, address="10.1.2.3").status_code == 200
    assert get(client, address="192.0.2.7").status_code == 200
    assert get(client, address="192.0.2.8").status_code == 403
    assert get(client, address="127.0.0.1").status_code == 403  # loopback is not special once configured


@pytest.mark.django_db
def test_token_and_allow_list_together_need_both(client, metrics_settings):
    metrics_settings.METRICS_TOKEN = "s3cret-token"
    metrics_settings.METRICS_ALLOW = ["10.0.0.0/8"]
    assert get(client, token="s3cret-token", address="192.0.2.8").status_code == 403
    assert get(client, address="10.1.2.3").status_code == 401
    assert get(client, token="s3cret-token", address="10.1.2.3").status_code == 200


@pytest.mark.django_db
def test_only_get(client, metrics_settings):
    metrics_settings.DEBUG = True
    assert client.post("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 405


@pytest.mark.django_db
def test_a_bad_allow_list_stops_the_settings(monkeypatch):
    import importlib

    from django.core.exceptions import ImproperlyConfigured

    import dashboard.settings

    monkeypatch.setenv("STEADYFLOW_METRICS_ALLOW", "10.0.0.0/8,not-an-address")
    monkeypatch.setenv("DEBUG", "1")
    with pytest.raises(ImproperlyConfigured, match="STEADYFLOW_METRICS_ALLOW='not-an-address'"):
        importlib.reload(dashboard.settings)
    monkeypatch.undo()
    importlib.reload(dashboard.settings)


@pytest.mark.django_db
def test_the_database_gauges_are_served_for_every_status(client, metrics_settings):
    metrics_settings.DEBUG = True
    text = get(client).content.decode()
    for status in ("pending", "running", "completed", "failed", "halted", "cancelled"):
        assert f'steadyflow_instances{{status="{status}"}} 0.0' in text
    assert "# TYPE steadyflow_steps_total counter" in text  # this process's counters (no multiprocess directory)


def test_every_metric_the_grafana_dashboard_uses_exists():
    dashboard = json.loads((ROOT / "docker" / "grafana-dashboard.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    used = {name for expr in exprs for name in re.findall(r"\bsteadyflow_[a-z_]+", expr)}
    known = metrics.metric_names()
    assert used, "the dashboard queries no steadyflow metric"
    assert used <= known, f"not served by /metrics: {sorted(used - known)}"
    # ...and every metric is on the dashboard (a histogram through one of its series).
    shown = {re.sub(r"_(bucket|sum|count)$", "", name) for name in used}
    assert {re.sub(r"_(bucket|sum|count)$", "", name) for name in known} <= shown
