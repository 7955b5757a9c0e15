from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from dashboard.models import SecurityEvent


@admin.register(SecurityEvent)
class SecurityEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "action", "username", "address")
    list_filter = ("action",)
    search_fields = ("username", "address")
    readonly_fields = [f.name for f in SecurityEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
