from django.contrib import admin

from alerts.models import Alert, AlertRule, Delivery, Destination


@admin.register(Destination)
class DestinationAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "kind", "url", "enabled")
    list_filter = ("kind", "team", "enabled")
    exclude = ("secret",)  # set through the API; never shown


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "trigger", "min_severity", "threshold", "window_minutes", "enabled")
    list_filter = ("trigger", "team", "enabled")


class DeliveryInline(admin.TabularInline):
    model = Delivery
    readonly_fields = ("destination", "state", "attempts", "log", "sent_at")
    extra = 0


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ("cluster", "rule", "key", "trigger", "created_at")
    inlines = [DeliveryInline]
