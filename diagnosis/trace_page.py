"""The trace page: a trace's files, its progress while it is worked on and, once done, its
diagnosis. Served by diagnosis (it shows the report) under ingest's URL names
(diagnosis/trace_urls.py)."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from diagnosis.diff_page import compare_candidates
from diagnosis.views import report_context
from ingest.models import Trace
from ingest.views import get_trace_for


@login_required
@require_GET
def trace_detail(request, trace_id: int):
    trace = get_trace_for(request, trace_id)
    context = {"trace": trace, "artifacts": trace.artifacts.all()}
    if trace.state == Trace.State.DONE:
        context.update(report_context(trace))
        context["compare_with"] = compare_candidates(trace)
    return render(request, "diagnosis/trace_detail.html", context)
