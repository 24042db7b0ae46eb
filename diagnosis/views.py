"""Web pages for the diagnosis: the report part of the trace page, and cluster triage."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_POST

from diagnosis.forms import ClusterTriageForm
from diagnosis.latency_chart import chart
from diagnosis.models import Cluster
from diagnosis.telemetry_chart import chart as telemetry_chart
from diagnosis.timeline import layout
from ingest.models import Artifact, Trace


def report_context(trace: Trace) -> dict:
    """What the trace page shows of a finished report: clusters with their findings (the
    headline first), SLO violations, the timeline, the per-step latency and GPU telemetry charts."""
    report = trace.report or {}
    findings = {f["id"]: f for f in report.get("findings", [])}
    team_clusters = {c.fingerprint: c for c in Cluster.objects.filter(
        team=trace.team, fingerprint__in=[c["fingerprint"] for c in report.get("clusters", [])])}
    clusters = [{**c, "members": [findings[i] for i in c["findings"] if i in findings],
                 "team_cluster": team_clusters.get(c["fingerprint"])}
                for c in report.get("clusters", [])]
    # lanes on the common clock the report used; stored extents are each file's own clock
    lanes = [(a["path"], a.get("start_ts"), a.get("end_ts")) for a in report.get("trace", {}).get("artifacts", [])] \
        or [(a.name, a.start_ts, a.end_ts) for a in trace.artifacts.exclude(format__in=Artifact.CONTAINERS)]
    return {"report": report, "clusters": clusters, "violations": report.get("violations", []),
            "timeline": layout(lanes, report.get("findings", [])),
            "latency_chart": chart(report.get("trace", {}).get("series", {}).get("step_latency_ms", [])),
            "telemetry_chart": telemetry_chart(report.get("trace", {}).get("series", {}).get("gpu_telemetry", {}),
                                               report.get("findings", []), report.get("trace", {}).get("start_ts"),
                                               report.get("trace", {}).get("end_ts"))}


def get_cluster_for(request, cluster_id: int) -> Cluster:
    return get_object_or_404(Cluster.objects.visible_to(request.user).select_related("team", "assignee"),
                             pk=cluster_id)


@login_required
@require_GET
def cluster_list(request):
    clusters = Cluster.objects.visible_to(request.user).select_related("team", "assignee")
    status = request.GET.get("status")
    if status:
        clusters = clusters.filter(status=status)
    rows = [(c, ClusterTriageForm(instance=c, prefix=f"c{c.pk}")) for c in clusters[:500]]
    return render(request, "diagnosis/cluster_list.html",
                  {"rows": rows, "statuses": Cluster.Status.values, "status": status})


@login_required
@require_GET
def cluster_detail(request, cluster_id: int):
    cluster = get_cluster_for(request, cluster_id)
    findings = cluster.findings.select_related("trace").order_by("-trace__created_at", "start_ts")[:200]
    return render(request, "diagnosis/cluster_detail.html", {
        "cluster": cluster, "findings": findings,
        "form": ClusterTriageForm(instance=cluster, prefix=f"c{cluster.pk}")})


@login_required
@require_POST
def cluster_triage(request, cluster_id: int):
    """Status / assignee change from the htmx selects; answers the updated row."""
    cluster = get_cluster_for(request, cluster_id)
    form = ClusterTriageForm(request.POST, instance=cluster, prefix=f"c{cluster.pk}")
    if form.is_valid():
        form.save()
    return render(request, "diagnosis/partials/cluster_row.html",
                  {"cluster": cluster, "form": form}, status=200 if form.is_valid() else 422)
