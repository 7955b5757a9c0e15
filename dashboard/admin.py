from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from dashboard.models import ApiToken, SecurityEvent
from dashboard.security import tokens


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


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Every user's API tokens, for admins: who has which, last used when; revoke any of them (the
    digest is never shown, and a token cannot be made or edited here: its owner makes it)."""

    list_display = ("name", "user", "key", "scopes", "created_at", "last_used_at", "expires_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "user__username", "key")
    exclude = ("digest",)
    readonly_fields = ("user", "name", "key", "scopes", "created_at", "expires_at", "revoked_at", "last_used_at")
    actions = ("revoke_tokens",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke_tokens(self, request: HttpRequest, queryset: Any) -> None:
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            tokens.revoke(token)
            revoked += 1
        self.message_user(request, f"{revoked} token(s) revoked")
