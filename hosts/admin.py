from django.contrib import admin

from hosts.models import BundleReceipt, CaptureRequest, Host


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "agent_version", "last_seen", "last_bundle_at", "pending_bundles"]
    list_filter = ["team"]
    search_fields = ["name"]


@admin.register(CaptureRequest)
class CaptureRequestAdmin(admin.ModelAdmin):
    list_display = ["id", "host", "kind", "state", "trace", "created_at", "finished_at"]
    list_filter = ["state", "kind"]


@admin.register(BundleReceipt)
class BundleReceiptAdmin(admin.ModelAdmin):
    list_display = ["key", "team", "trace", "received_at"]
    search_fields = ["key"]
