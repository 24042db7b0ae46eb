"""The trace page's selection panel, `/traces/{id}/timeline/selection/?start_ns=&end_ns=`: the
totals of a range selected on the timeline (shift-drag), an HTML fragment the page swaps in
with htmx."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from diagnosis.timeline_store import index_for
from diagnosis.engine.timeline.totals import totals
from ingest.engine.events import INT64_MAX, INT64_MIN
from ingest.models import Trace

BAR_PX = 60   # the busiest lane's bar in the totals table


def _bounded_int(text: str | None) -> int | None:
    try:
        value = int(text or "")
    except ValueError:
        return None
    return value if INT64_MIN <= value <= INT64_MAX else None


@login_required
@require_GET
def timeline_selection(request, trace_id: int):
    trace = get_object_or_404(Trace.objects.visible_to(request.user), pk=trace_id)
    start, end = _bounded_int(request.GET.get("start_ns")), _bounded_int(request.GET.get("end_ns"))
    if start is None or end is None or end <= start:
        return HttpResponseBadRequest("start_ns and end_ns: integers (ns), end after start")
    if trace.state != Trace.State.DONE:
        return render(request, "diagnosis/partials/timeline_selection.html", {"not_done": True}, status=409)
    index = index_for(trace)
    result = totals(index, start, end)
    busiest = max((lane.busy_ns for lane in result.lanes), default=0)
    rows = [{"lane": lane, "busy_pct": round(100 * lane.busy_ns / result.duration_ns, 1),
             "bar_px": round(BAR_PX * lane.busy_ns / busiest) if busiest else 0} for lane in result.lanes]
    return render(request, "diagnosis/partials/timeline_selection.html",
                  {"totals": result, "rows": rows, "offset_ns": start - index.start_ns,
                   "name_tables": [("GPU work that took the most time in the selection", result.gpu_names),
                                    ("Host calls, spans and lines that took the most time", result.other_names)]})
