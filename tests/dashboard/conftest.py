"""Fixtures of the dashboard tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def viewer(django_user_model: Any, redis_conn: Any) -> Any:
    """A user who may watch instances (the socket tests). The permission itself, not the group:
    transactional tests flush the groups the data migration made. test_api.py and test_editor_api.py
    define their own `viewer` (a logged-in client)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("viewer")
    user.user_permissions.add(Permission.objects.get(codename="view_workflowinstance"))
    return user
