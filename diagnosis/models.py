"""Findings of one trace, and clusters: a root cause seen across a team's traces.

Clusters work like issues in an error tracker: keyed by fingerprint per team, with first/
last seen, a trace count and a triage status. A resolved cluster seen in a new trace
becomes `regressed`.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from accounts.models import Team
from ingest.models import Trace

SEVERITIES = ("info", "warning", "error", "critical")
SEVERITY_CHOICES = [(s, s) for s in SEVERITIES]


class ClusterQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ClusterQuerySet":
        return self.filter(team__in=Team.objects.of(user))


class Cluster(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        RESOLVED = "resolved"
        IGNORED = "ignored"
        REGRESSED = "regressed"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="clusters")
    fingerprint = models.CharField(max_length=128)
    root_cause = models.CharField(max_length=120, blank=True)
    title = models.CharField(max_length=300)
    severity = models.CharField(max_length=10, choices=SEVERITY_CHOICES, default="info")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN, db_index=True)
    why_grouped = models.TextField(blank=True)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now, db_index=True)
    trace_count = models.IntegerField(default=0)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="assigned_clusters")

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ["-last_seen", "-id"]
        constraints = [models.UniqueConstraint(fields=["team", "fingerprint"], name="cluster_fingerprint_per_team")]

    def __str__(self) -> str:
        return self.title

    def refresh_trace_count(self) -> None:
        self.trace_count = self.findings.values("trace").distinct().count()
        self.save(update_fields=["trace_count"])


class Finding(models.Model):
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="findings")
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="findings")
    report_id = models.CharField(max_length=20)          # "F1": the id inside the report
    report_cluster = models.CharField(max_length=20, blank=True)  # "C1"
    rule_id = models.CharField(max_length=200)
    rule_version = models.IntegerField(default=1)
    title = models.CharField(max_length=300)
    severity = models.CharField(max_length=10, choices=SEVERITY_CHOICES, db_index=True)
    root_cause = models.CharField(max_length=120, blank=True)
    slo = models.CharField(max_length=120, blank=True)
    start_ts = models.BigIntegerField(null=True, blank=True)
    end_ts = models.BigIntegerField(null=True, blank=True)
    explanation = models.TextField(blank=True)
    recommendations = models.JSONField(default=list, blank=True)
    references = models.JSONField(default=list, blank=True)
    evidence = models.JSONField(default=list, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    consequence_of = models.CharField(max_length=20, blank=True)

    class Meta:
        ordering = ["trace", "start_ts", "id"]

    def __str__(self) -> str:
        return f"{self.report_id} {self.title}"


def record_report(trace: Trace, report: dict) -> None:
    """Replace the trace's findings with the report's and link them to the team's clusters
    by fingerprint. Running it twice for one trace gives the same rows and counts."""
    with transaction.atomic():
        before = set(trace.findings.exclude(cluster=None).values_list("cluster_id", flat=True))
        trace.findings.all().delete()
        clusters = {c["id"]: _cluster_seen(trace, c, seen_before=before) for c in report.get("clusters", [])}
        Finding.objects.bulk_create(_finding(trace, f, clusters) for f in report.get("findings", []))
        for cluster in Cluster.objects.filter(pk__in=before | {c.pk for c in clusters.values()}):
            cluster.refresh_trace_count()


def _cluster_seen(trace: Trace, c: dict, seen_before: set[int]) -> Cluster:
    cluster, created = Cluster.objects.get_or_create(
        team=trace.team, fingerprint=c["fingerprint"],
        defaults={"first_seen": trace.created_at, "last_seen": trace.created_at})
    cluster.title = (c.get("title") or cluster.title)[:300]
    cluster.root_cause = c.get("root_cause") or ""
    cluster.severity = c.get("severity") or cluster.severity
    cluster.why_grouped = c.get("why_grouped") or ""
    cluster.last_seen = max(cluster.last_seen, trace.created_at)
    if not created and cluster.pk not in seen_before and cluster.status == Cluster.Status.RESOLVED:
        cluster.status = Cluster.Status.REGRESSED
    cluster.save()
    return cluster


def _finding(trace: Trace, f: dict, clusters: dict[str, Cluster]) -> Finding:
    return Finding(
        trace=trace, cluster=clusters.get(f.get("cluster")), report_id=str(f.get("id", "")),
        report_cluster=f.get("cluster") or "", rule_id=f["rule_id"],
        rule_version=int(f.get("rule_version") or 1), title=f["title"][:300], severity=f["severity"],
        root_cause=f.get("root_cause") or "", slo=f.get("slo") or "",
        start_ts=f.get("start_ts"), end_ts=f.get("end_ts"), explanation=f.get("explanation") or "",
        recommendations=f.get("recommendations") or [], references=f.get("references") or [],
        evidence=f.get("evidence") or [], metrics=f.get("metrics") or {},
        consequence_of=f.get("consequence_of") or "")


class SLOQuerySet(models.QuerySet):
    def visible_to(self, user) -> "SLOQuerySet":
        return self.filter(team__in=Team.objects.of(user))

    def effective_for(self, team: Team) -> list:
        """The builtin SLOs with the team's enabled ones added; a team SLO with a builtin's
        id replaces it, a disabled one switches the builtin off."""
        from diagnosis.slo import load_slos
        merged = {s.id: s for s in load_slos()}
        for row in self.filter(team=team):
            if row.enabled:
                merged[row.slo_id] = row.as_slo()
            else:
                merged.pop(row.slo_id, None)
        return list(merged.values())


class SLODefinition(models.Model):
    """A team's SLO: a named SLI (diagnosis.slis), an objective and a window."""
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="slos")
    slo_id = models.SlugField(max_length=100, help_text="same id as a builtin SLO to replace it")
    title = models.CharField(max_length=200, blank=True)
    sli = models.CharField(max_length=60)
    objective = models.CharField(max_length=60, help_text="e.g. 'p99 <= 60ms', 'ratio >= 0.999', 'count <= 0'")
    window = models.CharField(max_length=20, default="60s")
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SLOQuerySet.as_manager()

    class Meta:
        ordering = ["slo_id"]
        constraints = [models.UniqueConstraint(fields=["team", "slo_id"], name="slo_id_per_team")]

    def __str__(self) -> str:
        return f"{self.slo_id}: {self.sli} {self.objective}"

    def as_slo(self):
        from diagnosis.slo import SLO
        return SLO(id=self.slo_id, title=self.title or self.slo_id, sli=self.sli, objective=self.objective,
                   window=self.window)

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from diagnosis.slis import SLI_FUNCTIONS
        from diagnosis.slo import SLOError
        if self.sli not in SLI_FUNCTIONS:
            raise ValidationError({"sli": f"unknown SLI {self.sli!r}; known: {', '.join(sorted(SLI_FUNCTIONS))}"})
        try:
            self.as_slo().parsed()
        except SLOError as e:
            raise ValidationError({"objective": str(e)}) from None
        try:
            self.as_slo().window_ns()
        except SLOError as e:
            raise ValidationError({"window": str(e)}) from None

    def save(self, *args, **kwargs):
        self.full_clean(exclude=["team"])
        super().save(*args, **kwargs)
