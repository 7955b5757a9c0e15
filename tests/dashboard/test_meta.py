"""The tables the pages' scripts read from the server (dashboard/pages/meta.py, workflows/engine/event_kinds.py)
instead of keeping copies: `GET /api/meta` and the `sf-meta` block every page renders."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from dashboard.pages.meta import STATUS_COLORS, ui_meta
from workflows.engine import event_kinds
from workflows.engine.statuses import INSTANCE_FINAL, InstanceStatus, StepStatus

ROOT = Path(__file__).resolve().parents[2]


def viewer(django_user_model: Any, name: str = "viewer") -> Any:
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(name)
    user.user_permissions.add(Permission.objects.get(codename="view_workflowinstance"))
    return user


def test_meta_needs_a_login_and_the_viewer_permission(client: Client, django_user_model: Any) -> None:
    response = client.get("/api/meta")
    assert response.status_code == 401
    assert response.json() == {"message": "authentication required"}
    client.force_login(django_user_model.objects.create_user("nobody"))
    assert client.get("/api/meta").status_code == 403
    # Nor is the block on a page for the anonymous (the login page).
    client.logout()
    assert 'id="sf-meta"' not in client.get("/accounts/login/").content.decode()


def test_meta_serves_the_engine_tables_and_a_colour_for_every_status(client: Client,
                                                                     django_user_model: Any) -> None:
    client.force_login(viewer(django_user_model))
    data = client.get("/api/meta").json()
    assert data == json.loads(json.dumps(ui_meta()))
    assert data["compensatePrefix"] == "compensate:"
    assert data["nodeStateByEvent"]["step_started"] == "running"
    assert data["instanceStatusByEvent"]["instance_halted"] == "halted"
    assert set(data["instanceFinal"]) == {str(s) for s in INSTANCE_FINAL}
    for status in [*InstanceStatus, *StepStatus]:
        assert status in STATUS_COLORS, f"no colour for {status}"
    for status in [*data["dashboardOrder"], *data["legend"], *data["lightStatuses"]]:
        assert status in data["statusColors"]
    assert set(data["dashboardOrder"]) == {str(s) for s in InstanceStatus}


def test_every_event_the_runtime_writes_is_a_known_kind() -> None:
    """A new event kind must be added to the table the live page reads (or the page ignores it silently)."""
    written: set[str] = set()
    for path in (ROOT / "workflows").rglob("*.py"):
        written.update(re.findall(r"\.event\(\s*\"([a-z_]+)\"", path.read_text()))
    written.update(f"instance_{status}" for status in INSTANCE_FINAL | {InstanceStatus.HALTED})  # finish_instance
    assert written, "no event calls found: the pattern no longer matches the runtime"
    assert written <= set(event_kinds.EVENT_KINDS), sorted(written - set(event_kinds.EVENT_KINDS))
    for status in event_kinds.NODE_STATE_BY_EVENT.values():
        assert status in set(StepStatus)
    for status in event_kinds.INSTANCE_STATUS_BY_EVENT.values():
        assert status in set(InstanceStatus)


@pytest.mark.parametrize("url", ["/", "/workflows/", "/instances/"])
def test_pages_carry_the_meta_block(client: Client, django_user_model: Any, url: str) -> None:
    client.force_login(viewer(django_user_model))
    body = client.get(url).content.decode()
    block = re.search(r'<script id="sf-meta" type="application/json">(.*?)</script>', body, re.S)
    assert block, f"{url} has no sf-meta block"
    assert json.loads(block.group(1))["statusColors"] == STATUS_COLORS
