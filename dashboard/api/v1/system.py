"""v1 breakers (list, reset) and health."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.http import HttpRequest
from django.utils import timezone
from ninja import Router

from dashboard.api.shapes import breakers
from dashboard.api.v1.auth import need
from dashboard.api.v1.problems import Problem
from dashboard.security import permissions
from workflows.adapters import breakers as breaker_store
from workflows.models import BreakerState

router = Router(tags=["system"])


@router.get("/breakers", response=dict[str, Any], summary="List circuit breakers")
def list_breakers(request: HttpRequest) -> dict[str, Any]:
    need(request, "read", "workflows.view_breakerstate")
    return {"items": breakers(timezone.now())}


@router.post("/breakers/{path:key}/reset", response=dict[str, Any], summary="Reset (close) a breaker")
def reset_breaker(request: HttpRequest, key: str) -> dict[str, Any]:
    need(request, "operate", permissions.RESET_BREAKER)
    if not BreakerState.objects.filter(key=key).exists():
        raise Problem(404, f"breaker {key!r} does not exist")
    breaker_store.reset(key)
    return {"items": [row for row in breakers(timezone.now()) if row["key"] == key]}


@router.get("/health", response=dict[str, Any], auth=None, summary="Health")
def health(request: HttpRequest) -> dict[str, Any]:
    """Liveness: the database answers (as /healthz). No authentication."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"ok": True}
