"""The pages of one trace that show its diagnosis. tracedoc/urls.py serves them with
ingest.urls under one namespace, `ingest`, so their names (ingest:trace-detail, ...) and
paths (/traces/<id>/...) stay what links, bookmarks and templates use."""
from django.urls import path

from diagnosis.diff_page import trace_diff, trace_diff_pick
from diagnosis.timeline_selection import timeline_selection
from diagnosis.trace_page import trace_detail

urlpatterns = [
    path("traces/<int:trace_id>/", trace_detail, name="trace-detail"),
    path("traces/<int:trace_id>/timeline/selection/", timeline_selection, name="trace-timeline-selection"),
    path("traces/<int:trace_id>/diff/", trace_diff_pick, name="trace-diff-pick"),
    path("traces/<int:trace_id>/diff/<int:base_id>/", trace_diff, name="trace-diff"),
]
