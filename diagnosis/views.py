"""Web pages for the diagnosis: the report part of the trace page, re-diagnosis, the issue
stream and cluster triage."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from diagnosis import stream
from accounts.models import Team
from diagnosis.cluster_activity import activity_log
from diagnosis.cluster_merge import MergeRefused, merge, merged_fingerprints, merged_into, unmerge
from diagnosis.forms import BulkActionForm, ClusterTriageForm, CommentForm, MergeForm, SnoozeForm, StreamFilterForm
from diagnosis.engine.charts.latency import chart
from diagnosis.models import ClusterRecord
from diagnosis.rediagnose import RediagnoseRefused, rediagnose
from diagnosis.engine.results import Cluster, Report
from diagnosis.snooze import SNOOZE_PRESETS
from diagnosis.stream_query import from_parameters
from diagnosis.engine.charts.telemetry import chart as telemetry_chart
from diagnosis.engine.timeline import layout
from ingest.models import Artifact, Trace
from rules.engine.results import Finding

STREAM_PAGE_SIZE = 50
DETAIL_PERIOD_DAYS = 30


@dataclass(frozen=True)
class ClusterOnPage:
    """A report cluster as the trace page shows it: its findings (in time order) and the
    team's record of that root cause (status, trace count)."""
    cluster: Cluster
    members: tuple[Finding, ...]
    record: ClusterRecord | None


@dataclass(frozen=True)
class Headline:
    """The top of the trace page: what broke (the worst cluster's headline finding), one
    line of why and the first thing to do."""
    cluster: Cluster
    finding: Finding
    why: str
    first_fix: str


def first_sentence(text: str, limit: int = 240) -> str:
    """The explanation's first sentence (one line of why), cut at `limit` characters."""
    text = " ".join(text.split())
    for stop in (". ", "; "):
        if stop in text[:limit]:
            return text[:text.index(stop, 0, limit) + 1]
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def headline_of(clusters: list[ClusterOnPage]) -> Headline | None:
    """The report orders clusters worst first; its first cluster's headline finding leads."""
    if not clusters or not clusters[0].members:
        return None
    top = clusters[0]
    finding = next((f for f in top.members if f.id == top.cluster.headline), top.members[0])
    fix = next((r for f in (finding, *top.members) for r in f.recommendations[:1]), "")
    return Headline(top.cluster, finding, first_sentence(finding.explanation), fix)


def report_context(trace: Trace) -> dict:
    """What the trace page shows of a finished report: clusters with their findings (the
    headline first), SLO violations, the timeline, the per-step latency and GPU telemetry charts."""
    report = Report.from_dict(trace.report or {})
    findings = {f.id: f for f in report.findings}
    records = {c.fingerprint: c for c in ClusterRecord.objects.filter(
        team=trace.team, fingerprint__in=[c.fingerprint for c in report.clusters])}
    clusters = [ClusterOnPage(c, tuple(findings[i] for i in c.findings if i in findings), records.get(c.fingerprint))
                for c in report.clusters]
    # lanes on the common clock the report used; stored extents are each file's own clock
    lanes = [(a.path, a.start_ts, a.end_ts) for a in report.trace.artifacts] \
        or [(a.name, a.start_ts, a.end_ts) for a in trace.artifacts.exclude(format__in=Artifact.CONTAINERS)]
    series = report.trace.series
    return {"report": report if trace.report else None, "clusters": clusters, "violations": report.violations,
            "headline": headline_of(clusters),
            "timeline": layout(lanes, report.findings,
                               own_clock={a["artifact"] for a in report.trace.alignment if not a.get("aligned", True)}),
            "latency_chart": chart(series.get("step_latency_ms", [])),
            "telemetry_chart": telemetry_chart(series.get("gpu_telemetry", {}), report.findings,
                                               report.trace.start_ts, report.trace.end_ts)}


def get_cluster_for(request, cluster_id: int) -> ClusterRecord:
    return get_object_or_404(ClusterRecord.objects.visible_to(request.user).select_related("team", "assignee"),
                             pk=cluster_id)


DEFAULT_QUERY = "is:unresolved"
# the stream's older one-filter parameters: on the page they become the search bar's query
FILTER_PARAMETERS = tuple(name for name in StreamFilterForm.base_fields if name not in ("query", "period"))


@login_required
@require_GET
def cluster_list(request):
    """The issue stream: one search bar (diagnosis.stream_query), sort, pagination, markers and
    per-day counts (diagnosis.stream). Unresolved issues by default; a link with the older
    filter parameters opens as the query that says the same."""
    if any(request.GET.get(name) for name in FILTER_PARAMETERS):
        legacy = StreamFilterForm(request.GET)
        if legacy.is_valid():
            return _as_query(request, legacy.cleaned_data)
        # else the page below lists what it could not read (400)
    params = request.GET.copy()
    params.setdefault("query", DEFAULT_QUERY)
    filters = StreamFilterForm(params)
    valid = filters.is_valid()
    data = filters.cleaned_data if valid else {}
    clusters = stream.filtered(ClusterRecord.objects.visible_to(request.user).select_related("team", "assignee"),
                               data, user=request.user) if valid else ClusterRecord.objects.none()
    page = Paginator(clusters, STREAM_PAGE_SIZE).get_page(request.GET.get("page"))
    selected = stream.Range.of(data)
    query = params.copy()
    query.pop("page", None)
    text = params.get("query", "")
    return render(request, "diagnosis/cluster_list.html", {
        "rows": [(row, ClusterTriageForm(instance=row.cluster, prefix=f"c{row.cluster.pk}"))
                 for row in stream.rows(list(page.object_list), selected)],
        "page": page, "filters": filters, "query": query.urlencode(), "selected": selected, "search": text,
        "tabs": _tabs(text), "snooze_presets": SNOOZE_PRESETS,
        "bulk_statuses": ClusterRecord.Status.values}, status=200 if valid else 400)


def _as_query(request, data: dict):
    """Redirect a link of the older parameters to the stream with the query that says the same."""
    keep = {k: request.GET[k] for k in ("period",) if request.GET.get(k)}
    keep["query"] = " ".join(filter(None, [data["query"].text, from_parameters(data)]))
    return redirect(reverse("diagnosis:cluster-list") + "?" + urlencode(keep))


# the tabs above the search bar: each one a query of its own
TABS = (("Unresolved", "is:unresolved"), ("Unassigned", "is:unresolved is:unassigned"),
        ("For me", "is:unresolved assignee:me"), ("Regressed", "is:regressed"), ("Snoozed", "is:ignored"),
        ("Resolved", "is:resolved"), ("All", ""))


def _tabs(text: str) -> list[tuple[str, str, bool]]:
    return [(name, query, " ".join(text.split()) == query) for name, query in TABS]


@login_required
@require_POST
def cluster_bulk(request):
    """One status for the clusters ticked on the stream; back to the same stream."""
    form = BulkActionForm(request.POST, clusters=ClusterRecord.objects.visible_to(request.user))
    if form.is_valid():
        for cluster in form.cleaned_data["clusters"]:
            cluster.change(request.user, status=form.cleaned_data["status"])
        messages.success(request, f"{len(form.cleaned_data['clusters'])} cluster(s) set to "
                                  f"{form.cleaned_data['status']}")
    else:
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    back = request.POST.get("query", "")
    return redirect(reverse("diagnosis:cluster-list") + (f"?{back}" if back else ""))


@login_required
@require_POST
def cluster_merge(request, cluster_id: int | None = None):
    """Fold clusters into one: from the stream, the ticked ones into the one seen in the most
    traces; from a cluster page, the typed issue numbers into that cluster. Future occurrences
    of the merged fingerprints land on it."""
    visible = ClusterRecord.objects.visible_to(request.user)
    form = MergeForm(request.POST, clusters=visible)
    target = get_cluster_for(request, cluster_id) if cluster_id is not None else None
    try:
        if not form.is_valid():
            raise MergeRefused("; ".join(" ".join(v) for v in form.errors.values()))
        chosen = form.chosen()
        if target is None:
            if len(chosen) < 2:
                raise MergeRefused("tick two or more issues to merge")
            target = max(chosen, key=lambda c: (c.trace_count, -c.first_seen.timestamp(), -c.pk))
        target = merge(target, chosen, request.user)
    except (MergeRefused, forms.ValidationError) as e:
        messages.error(request, " ".join(getattr(e, "messages", [str(e)])))
        if cluster_id is not None:
            return redirect("diagnosis:cluster-detail", cluster_id)
        back = request.POST.get("query", "")
        return redirect(reverse("diagnosis:cluster-list") + (f"?{back}" if back else ""))
    others = [c for c in chosen if c.pk != target.pk]
    messages.success(request, f"merged {', '.join(f'#{c.pk}' for c in others)} into “{target.title}”: "
                              "their future occurrences land here")
    return redirect("diagnosis:cluster-detail", target.pk)


@login_required
@require_POST
def cluster_unmerge(request, cluster_id: int):
    """Split a merged fingerprint back out into a cluster of its own."""
    cluster = get_cluster_for(request, cluster_id)
    try:
        split = unmerge(cluster, request.POST.get("fingerprint", ""), request.user)
    except MergeRefused as e:
        messages.error(request, str(e))
        return redirect("diagnosis:cluster-detail", cluster.pk)
    messages.success(request, f"split {split.fingerprint} out as #{split.pk}")
    return redirect("diagnosis:cluster-detail", split.pk)


@login_required
@require_GET
def cluster_detail(request, cluster_id: int):
    if not ClusterRecord.objects.visible_to(request.user).filter(pk=cluster_id).exists():
        now_in = merged_into(Team.objects.of(request.user), cluster_id)
        if now_in is not None:  # an old link to a cluster merged since
            return redirect("diagnosis:cluster-detail", now_in.pk)
    cluster = get_cluster_for(request, cluster_id)
    findings = list(cluster.findings.select_related("trace").order_by("-trace__created_at", "start_ts")[:200])
    sightings = list(cluster.sightings.select_related("trace").order_by("-seen_at", "trace_id", "host")[:500])
    traces: dict[int, dict] = {}
    for s in sightings:
        entry = traces.setdefault(s.trace_id, {"trace": s.trace, "hosts": [], "findings": []})
        if s.host:
            entry["hosts"].append(s.host)
    for f in findings:
        if f.trace_id in traces:
            traces[f.trace_id]["findings"].append(f)
    row = stream.rows([cluster], stream.Range.of({"period": DETAIL_PERIOD_DAYS}))[0]
    return render(request, "diagnosis/cluster_detail.html", {
        "cluster": cluster, "row": row, "headline": findings[0] if findings else None,
        "traces": list(traces.values()),
        "rule_versions": sorted({(f.rule_id, f.rule_version) for f in findings}),
        "activity": activity_log(cluster),
        "form": ClusterTriageForm(instance=cluster, prefix=f"c{cluster.pk}"),
        "comment_form": CommentForm(), "snooze_form": SnoozeForm(), "snooze_presets": SNOOZE_PRESETS,
        "merged": merged_fingerprints(cluster)})


@login_required
@require_POST
def cluster_triage(request, cluster_id: int):
    """Status / assignee change from the htmx selects; answers the updated row. Every change
    goes to the activity log."""
    cluster = get_cluster_for(request, cluster_id)
    form = ClusterTriageForm(request.POST, instance=get_cluster_for(request, cluster_id), prefix=f"c{cluster.pk}")
    if form.is_valid():
        cluster.change(request.user, status=form.cleaned_data["status"], assignee=form.cleaned_data["assignee"])
    row = stream.rows([cluster], stream.Range.of({}))[0]
    return render(request, "diagnosis/partials/cluster_row.html",
                  {"row": row, "form": form, "snooze_presets": SNOOZE_PRESETS, "query": ""}, status=200 if form.is_valid() else 422)


@login_required
@require_POST
def cluster_comment(request, cluster_id: int):
    cluster = get_cluster_for(request, cluster_id)
    form = CommentForm(request.POST)
    if form.is_valid():
        cluster.change(request.user, text=form.cleaned_data["text"])
    else:
        messages.error(request, "a comment needs some text")
    return redirect("diagnosis:cluster-detail", cluster.pk)


@login_required
@require_POST
def cluster_snooze(request, cluster_id: int):
    """Ignore until a time or a trace count (a preset in plain words, or one's own): the
    cluster opens again when seen after that. Back to where the button was (the stream or
    the cluster page)."""
    cluster = get_cluster_for(request, cluster_id)
    form = SnoozeForm(request.POST)
    if form.is_valid():
        snooze = form.snooze(cluster)
        cluster.change(request.user, status=ClusterRecord.Status.IGNORED, snooze_until=snooze.until,
                       snooze_count=snooze.count)
        messages.success(request, f"“{cluster.title}” snoozed {snooze.describe()}")
    else:
        messages.error(request, " ".join(form.non_field_errors()) or
                       "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    back = request.POST.get("back", "")
    if back.startswith("?") or back == "stream":
        return redirect(reverse("diagnosis:cluster-list") + (back if back.startswith("?") else ""))
    return redirect("diagnosis:cluster-detail", cluster.pk)


@login_required
@require_POST
def trace_rediagnose(request, trace_id: int):
    """The trace page's button: the current rules on the stored events, in a worker."""
    trace = get_object_or_404(Trace.objects.visible_to(request.user), pk=trace_id)
    try:
        rediagnose(trace)
    except RediagnoseRefused as e:
        messages.error(request, str(e))
    else:
        messages.success(request, "diagnosing again with the current rules")
    return redirect("ingest:trace-detail", trace.pk)
