"""Shared fixtures for the security tests: a superuser's client (so permissions never hide a crash), a
saved workflow and an instance of it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.conftest import chain
from workflows import runtime
from workflows.authoring.definitions import save_version
from workflows.models import WorkflowInstance, WorkflowVersion

GRAPH = chain({"id": "work", "type": "python", "config": {"function": "noop"}})
SLUG = "hostile"


@pytest.fixture
def admin_client_(db: None, django_user_model: Any) -> Client:
    user = django_user_model.objects.create_superuser("root", password="correct horse battery staple")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def version(db: None) -> WorkflowVersion:
    return save_version(SLUG, GRAPH)


@pytest.fixture
def instance(version: WorkflowVersion) -> WorkflowInstance:
    return runtime.start_instance(version, {"n": 1})
