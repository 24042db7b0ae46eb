"""The trace page moved to diagnosis (issue 31) under the names and paths links use."""
from django.urls import resolve, reverse

from diagnosis.trace_page import trace_detail


def test_the_trace_pages_keep_their_names_and_paths():
    assert reverse("ingest:trace-detail", args=[7]) == "/traces/7/"
    assert reverse("ingest:trace-diff", args=[7, 3]) == "/traces/7/diff/3/"
    assert reverse("ingest:trace-progress", args=[7]) == "/traces/7/progress/"
    assert reverse("ingest:trace-list") == "/"


def test_the_trace_page_is_served_by_diagnosis():
    assert resolve("/traces/7/").func is trace_detail
