"""WebSocket routes (dashboard/asgi.py puts them behind AllowedHostsOriginValidator and
AuthMiddlewareStack)."""

from __future__ import annotations

from typing import Any

from django.urls import path

from dashboard.live.consumers import DashboardConsumer, InstanceConsumer

websocket_urlpatterns: list[Any] = [
    path("ws/instances/<int:instance_id>/", InstanceConsumer.as_asgi()),
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
]
