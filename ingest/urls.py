from django.urls import path

from ingest import views
from ingest.downloads import artifact_download

# with diagnosis/trace_urls.py (the trace page, its timeline and diffs) under the namespace
# `ingest` in tracedoc/urls.py: ingest serves upload, list, progress and downloads
app_name = "ingest"
urlpatterns = [
    path("", views.trace_list, name="trace-list"),
    path("traces/new/", views.trace_upload, name="trace-upload"),
    path("traces/<int:trace_id>/progress/", views.trace_progress, name="trace-progress"),
    path("traces/<int:trace_id>/artifacts/<int:artifact_id>/download/", artifact_download, name="artifact-download"),
]
