from django.contrib import admin

from diagnosis.models import ClusterRecord, FindingRecord, SLODefinition


@admin.register(ClusterRecord)
class ClusterRecordAdmin(admin.ModelAdmin):
    list_display = ("title", "team", "severity", "status", "trace_count", "last_seen", "assignee")
    list_filter = ("status", "severity", "team")
    search_fields = ("title", "root_cause", "fingerprint")


@admin.register(FindingRecord)
class FindingRecordAdmin(admin.ModelAdmin):
    list_display = ("report_id", "title", "severity", "rule_id", "trace")
    list_filter = ("severity",)
    search_fields = ("rule_id", "title", "root_cause")


@admin.register(SLODefinition)
class SLODefinitionAdmin(admin.ModelAdmin):
    list_display = ("slo_id", "team", "sli", "objective", "window", "enabled")
    list_filter = ("team", "enabled")
