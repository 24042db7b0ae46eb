"""The trace diff page, `/traces/{id}/diff/{base_id}/`: the clusters a change made appear,
vanish or stay, the SLI deltas and the verdict, from the two stored reports."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from diagnosis.diff_render import MARK
from diagnosis.stored_diff import compare_stored
from ingest.models import Trace


@login_required
@require_GET
def trace_diff(request, trace_id: int, base_id: int):
    visible = Trace.objects.visible_to(request.user).select_related("team").defer("report")
    trace, base = get_object_or_404(visible, pk=trace_id), get_object_or_404(visible, pk=base_id)
    context = {"trace": trace, "base": base, "marks": MARK,
               "not_done": [side for side in (base, trace) if side.state != Trace.State.DONE]}
    if not context["not_done"]:
        reports = dict(Trace.objects.filter(pk__in=(trace.pk, base.pk)).values_list("pk", "report"))
        diff = compare_stored(reports[base.pk] or {}, reports[trace.pk] or {})
        context.update(diff=diff, clusters_by_status=[(status, diff.clusters_by_status(status)) for status in MARK])
    return render(request, "diagnosis/trace_diff.html", context, status=409 if context["not_done"] else 200)


@login_required
@require_GET
def trace_diff_pick(request, trace_id: int):
    """The trace page's "compare with…" form (a plain GET, no script): on to the diff page."""
    trace = get_object_or_404(Trace.objects.visible_to(request.user).defer("report"), pk=trace_id)
    try:
        base_id = int(request.GET.get("base", ""))
    except ValueError:
        return redirect("ingest:trace-detail", trace.pk)
    return redirect("ingest:trace-diff", trace.pk, base_id)


def compare_candidates(trace: Trace, limit: int = 50) -> list[Trace]:
    """The other diagnosed traces of the trace's team, newest first: what the select offers."""
    return list(Trace.objects.filter(team=trace.team, state=Trace.State.DONE).exclude(pk=trace.pk)
                .defer("report").order_by("-created_at")[:limit])
