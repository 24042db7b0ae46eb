from django.contrib import admin

from ingest.models import Artifact, Trace


class ArtifactInline(admin.TabularInline):
    model = Artifact
    fields = ("name", "format", "size", "event_count", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "team", "state", "created_by", "created_at")
    list_filter = ("state", "team")
    search_fields = ("name",)
    readonly_fields = ("state", "state_history", "report", "bytes_total", "bytes_done", "events_done",
                       "artifacts_total", "artifacts_done", "created_at", "updated_at")
    inlines = [ArtifactInline]
