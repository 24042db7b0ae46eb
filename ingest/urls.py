from django.urls import path

from diagnosis.diff_page import trace_diff, trace_diff_pick
from diagnosis.timeline_selection import timeline_selection
from ingest import views
from ingest.downloads import artifact_download

app_name = "ingest"
urlpatterns = [
    path("", views.trace_list, name="trace-list"),
    path("traces/new/", views.trace_upload, name="trace-upload"),
    path("traces/<int:trace_id>/", views.trace_detail, name="trace-detail"),
    path("traces/<int:trace_id>/progress/", views.trace_progress, name="trace-progress"),
    path("traces/<int:trace_id>/artifacts/<int:artifact_id>/download/", artifact_download, name="artifact-download"),
    path("traces/<int:trace_id>/timeline/selection/", timeline_selection, name="trace-timeline-selection"),
    path("traces/<int:trace_id>/diff/", trace_diff_pick, name="trace-diff-pick"),
    path("traces/<int:trace_id>/diff/<int:base_id>/", trace_diff, name="trace-diff"),
]
