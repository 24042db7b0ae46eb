"""The trace diff page, `/traces/{id}/diff/{base_id}/`: the clusters a change made appear,
vanish or stay, the SLI deltas and the verdict, from the two stored reports."""
from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from diagnosis.engine.diff.render import MARK
from diagnosis.engine.diff.stored import compare_stored
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


# labels that differ between any two runs of one job: they say nothing about which runs are alike
RUN_LABELS = frozenset({"window_start", "window_end", "exit_code", "failed", "signal", "agent_version", "source",
                        "capture"})
# preselected only from this likeness on: the same name, or two shared labels (one, such as the
# host alone, is shared by unrelated jobs)
PRESELECT_FROM = 2


def _run_name(name: str) -> str:
    """A name without a wrap's " (exit N)" ending: two runs of one command are one name."""
    head, sep, tail = name.rstrip().rpartition(" (exit ")
    return head if sep and tail.endswith(")") and tail[:-1].isdigit() else name.strip()


@dataclass(frozen=True)
class CompareChoices:
    """What the trace page's "Compare with…" select offers: the traces like this one first
    (`similar`, most alike, then the previous run), then the others newest first; `preselected`
    is the most alike one, or None when none shares a name or a label with it (the select
    then asks for a pick rather than guessing an unrelated trace)."""
    similar: list[Trace]
    others: list[Trace]
    preselected: Trace | None

    def __bool__(self) -> bool:
        return bool(self.similar or self.others)


def likeness(trace: Trace, other: Trace) -> int:
    """How alike two traces of a team are: the same name (a wrap's exit code left out) counts
    three, each shared label that is not a run's own (time window, exit code) one."""
    same_name = bool(trace.name) and _run_name(trace.name) == _run_name(other.name)
    shared = {(k, str(v)) for k, v in trace.labels.items() if k not in RUN_LABELS} & \
             {(k, str(v)) for k, v in other.labels.items() if k not in RUN_LABELS}
    return 3 * same_name + len(shared) + 3 * (other.pk == trace.adds_to_id)


def compare_candidates(trace: Trace, limit: int = 50, scan: int = 500) -> CompareChoices:
    """The other diagnosed traces of the trace's team (the newest `scan`), the ones like it
    first: the most alike, and among equals the previous run (received before it, newest)."""
    recent = list(Trace.objects.filter(team=trace.team, state=Trace.State.DONE).exclude(pk=trace.pk)
                  .defer("report").order_by("-created_at")[:scan])
    scored = [(likeness(trace, t), t) for t in recent]
    similar = [t for score, t in sorted((p for p in scored if p[0] > 0),
                                        key=lambda p: (-p[0], p[1].created_at > trace.created_at,
                                                       -p[1].created_at.timestamp()))]
    others = [t for score, t in scored if score == 0]
    similar = similar[:limit]
    best = similar[0] if similar and likeness(trace, similar[0]) >= PRESELECT_FROM else None
    return CompareChoices(similar, others[:max(0, limit - len(similar))], best)
