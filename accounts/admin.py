from django.contrib import admin
from django.utils import timezone

from accounts.models import ApiToken, AuditEntry, Team


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "created_at")
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("members",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are issued with `manage.py createtoken` (the key is shown once); here they are
    listed, given an expiry or revoked. The key itself is nowhere: only its hash is stored."""
    list_display = ("user", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("user__username", "name", "prefix")
    fields = ("user", "name", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at")
    readonly_fields = ("user", "prefix", "created_at", "last_used_at")
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset.filter(revoked_at__isnull=True):  # one save each: the audit log sees it
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    """Read only: the log is written by accounts.audit, never by hand."""
    list_display = ("at", "actor_name", "team", "action", "object_type", "object_repr")
    list_filter = ("action", "object_type", "team")
    search_fields = ("actor_name", "object_repr", "object_id")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
