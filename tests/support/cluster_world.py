"""A small on-call world for the stream and alert tests: typed reports of chosen clusters
recorded on traces received at chosen times, with host/env labels (this tests the stream,
not the rules)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from accounts.models import Team
from diagnosis.models import ClusterTransition, record_report
from diagnosis.engine.results import Cluster, Report, TraceSummary
from ingest.models import Trace
from rules.engine.results import Evidence, Finding


@dataclass(frozen=True)
class Cause:
    fingerprint: str
    severity: str
    root_cause: str
    slo: str | None = None


NCCL = Cause("fp-nccl", "error", "nccl.timeout.stream_blocked")
OOM = Cause("fp-oom", "critical", "memory.oom", slo="ttft")
GRAPH = Cause("fp-graph", "warning", "cuda_graph.capture_abort")
COLD = Cause("fp-cold", "info", "startup.cold_start")


def report(*causes: Cause, hosts: tuple[str, ...] = ()) -> Report:
    clusters, findings = [], []
    for n, cause in enumerate(causes, 1):
        clusters.append(Cluster(id=f"C{n}", fingerprint=cause.fingerprint, root_cause=cause.root_cause,
                                title=f"{cause.root_cause} incident", severity=cause.severity, headline=f"F{n}",
                                findings=(f"F{n}",), slos=(cause.slo,) if cause.slo else (),
                                why_grouped="a single finding", start_ts=10))
        findings.append(Finding(
            id=f"F{n}", rule_id=f"rule.{cause.root_cause}", rule_version=3, title=f"{cause.root_cause} found",
            severity=cause.severity, root_cause=cause.root_cause, cluster=f"C{n}", slo=cause.slo, start_ts=10,
            end_ts=20, explanation=f"{cause.root_cause} explained", recommendations=("restart it",),
            evidence=(Evidence(artifact="rank0.log", loc="line 3", ts=10, text="evidence"),)))
    return Report(trace=TraceSummary(artifacts=(), events=0, start_ts=None, end_ts=None, hosts=hosts),
                  findings=tuple(findings), clusters=tuple(clusters))


def seen(team: Team, *causes: Cause, at: datetime | None = None, labels: dict | None = None,
         hosts: tuple[str, ...] = ()) -> tuple[Trace, list[ClusterTransition]]:
    """A trace received at `at` whose report has `causes`, recorded like a diagnosis does."""
    trace = Trace.objects.create(team=team, name=f"trace {'+'.join(c.fingerprint for c in causes)}",
                                 labels=labels or {}, state=Trace.State.DONE)
    if at is not None:
        Trace.objects.filter(pk=trace.pk).update(created_at=at)
        trace.refresh_from_db()
    return trace, record_report(trace, report(*causes, hosts=hosts))


def days_ago(n: float) -> datetime:
    return timezone.now() - timedelta(days=n)
