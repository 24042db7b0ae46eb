"""Findings of one trace, and clusters: a root cause seen across a team's traces.

Clusters work like issues in an error tracker: keyed by fingerprint per team, with first/
last seen, a trace count, a triage status and an activity log. Only `warning` and worse
open a cluster: an `info` finding stays on its trace. A sighting is one trace (and host)
that saw a cluster: the stream's host/label filters, recurrence per day and affected hosts
read them. Recording a report tells who listens (`clusters_recorded`: the alerts) which
clusters were new, regressed or seen again.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import msgspec
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.dispatch import Signal
from django.utils import timezone

from accounts.models import Team
from diagnosis.engine import clusters as grouping
from diagnosis.engine.results import Cluster, Report, json_values
from diagnosis.engine.slis import SLI_FUNCTIONS
from diagnosis.engine.slo import SLO, SLOError, load_slos
from ingest.models import Trace
from rules.engine.capture_plans import CapturePlan
from rules.engine.results import Evidence, Finding
from rules.engine.severity import RANK, SEVERITIES, at_least

SEVERITY_CHOICES = [(s, s) for s in SEVERITIES]
# below this a report cluster opens no team cluster: a cold start is not an incident (docs/rules.md)
CLUSTER_MIN_SEVERITY = "warning"

# sent once a report is stored: sender=Trace, trace=..., transitions=[ClusterTransition, ...]
clusters_recorded = Signal()


@dataclass(frozen=True)
class ClusterTransition:
    """What storing one trace's report did to one team cluster."""
    NEW, REGRESSED, SEEN = "new", "regressed", "seen"

    cluster_id: int
    kind: str        # NEW: first sighting ever; REGRESSED: a resolved one came back; SEEN: again
    trace_id: int
    key: str         # the transition's identity: an alert fires once per key (alerts.models)


class ClusterRecordQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ClusterRecordQuerySet":
        return self.filter(team__in=Team.objects.of(user))

    def with_severity_rank(self) -> "ClusterRecordQuerySet":
        return self.annotate(severity_rank=models.Case(
            *(models.When(severity=s, then=models.Value(r)) for s, r in RANK.items()),
            default=models.Value(-1), output_field=models.IntegerField()))


class ClusterRecord(models.Model):
    """A root cause across a team's traces: the report clusters of one fingerprint.

    open -> acknowledged -> resolved / ignored; a resolved one seen in a new trace becomes
    regressed; an ignored one with a snooze (until a time, or until it reaches a trace count)
    opens again when seen after the snooze ran out."""

    class Status(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        RESOLVED = "resolved"
        IGNORED = "ignored"
        REGRESSED = "regressed"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="clusters")
    fingerprint = models.CharField(max_length=128)
    root_cause = models.CharField(max_length=120, blank=True)
    title = models.CharField(max_length=300)
    severity = models.CharField(max_length=10, choices=SEVERITY_CHOICES, default="info")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.OPEN, db_index=True)
    why_grouped = models.TextField(blank=True)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now, db_index=True)
    trace_count = models.IntegerField(default=0)
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="assigned_clusters")
    snooze_until = models.DateTimeField(null=True, blank=True, help_text="ignored until this time")
    snooze_count = models.IntegerField(null=True, blank=True, help_text="ignored until seen in this many traces")
    regressions = models.IntegerField(default=0)  # how often it came back after being resolved
    # the grouping version (diagnosis.engine.clusters.GROUPING_VERSION) its fingerprint was computed under;
    # fingerprints it had before are its `earlier` ClusterFingerprint rows
    grouping_version = models.PositiveSmallIntegerField(default=1)

    objects = ClusterRecordQuerySet.as_manager()

    class Meta:
        ordering = ["-last_seen", "-id"]
        constraints = [models.UniqueConstraint(fields=["team", "fingerprint"], name="cluster_fingerprint_per_team")]

    def __str__(self) -> str:
        return self.title

    def refresh_trace_count(self) -> None:
        self.trace_count = self.findings.values("trace").distinct().count()
        self.save(update_fields=["trace_count"])

    def snooze_over(self, now: datetime, traces: int) -> bool:
        """An ignored cluster with a snooze whose time or trace count has been reached."""
        return ((self.snooze_until is not None and now >= self.snooze_until)
                or (self.snooze_count is not None and traces >= self.snooze_count))

    def change(self, actor, *, text: str = "", **fields) -> list["ClusterActivity"]:
        """Set status / assignee / snooze fields and log each change with who and when;
        a comment (`text`) alone is logged too."""
        entries = []
        for name, value in fields.items():
            old = getattr(self, name)
            if old == value:
                continue
            setattr(self, name, value)
            entries.append(ClusterActivity(cluster=self, actor=actor, kind=name,
                                           old=_shown(old), new=_shown(value)))
        if fields.get("status") not in (None, self.Status.IGNORED):
            self.snooze_until = self.snooze_count = None
        if entries:
            self.save()
        if text.strip():
            entries.append(ClusterActivity(cluster=self, actor=actor, kind=ClusterActivity.Kind.COMMENT,
                                           text=text.strip()))
        return ClusterActivity.objects.bulk_create(entries)

    @classmethod
    def seen_in(cls, trace: Trace, cluster: Cluster, seen_before: set[int]) -> tuple["ClusterRecord", str]:
        """The team's record of a report cluster, created or updated from it, and what
        happened to it (ClusterTransition.NEW / REGRESSED / SEEN). A resolved one seen in a
        trace that did not have it before becomes `regressed`; an ignored one whose snooze
        ran out opens again."""
        record, created = cls._of(trace, cluster)
        record.title = (cluster.title or record.title)[:300]
        record.root_cause = cluster.root_cause
        record.severity = cluster.severity or record.severity
        record.why_grouped = cluster.why_grouped
        record.last_seen = max(record.last_seen, trace.created_at)
        happened = ClusterTransition.NEW if created else ClusterTransition.SEEN
        log = ClusterActivity(cluster=record, trace=trace, kind=ClusterActivity.Kind.CREATED) if created else None
        again = not created and record.pk not in seen_before
        if again and record.status == cls.Status.RESOLVED:
            record.status, happened = cls.Status.REGRESSED, ClusterTransition.REGRESSED
            record.regressions += 1
            log = ClusterActivity(cluster=record, trace=trace, kind=ClusterActivity.Kind.STATUS,
                                  old=cls.Status.RESOLVED, new=cls.Status.REGRESSED, text="seen again after resolved")
        elif again and record.status == cls.Status.IGNORED and record.snooze_over(timezone.now(),
                                                                                 record.trace_count + 1):
            log = ClusterActivity(cluster=record, trace=trace, kind=ClusterActivity.Kind.STATUS,
                                  old=cls.Status.IGNORED, new=cls.Status.OPEN, text="snooze ran out")
            record.status, record.snooze_until, record.snooze_count = cls.Status.OPEN, None, None
        record.save()
        if log is not None:
            log.save()
        return record, happened

    @classmethod
    def _of(cls, trace: Trace, cluster: Cluster) -> tuple["ClusterRecord", bool]:
        """The team's record of the cluster's fingerprint; else the one recorded under an earlier
        fingerprint of it, which takes the new one (and keeps the old); else the one that had this
        fingerprint before (a report of an earlier grouping recorded again); else a new one."""
        team = trace.team
        record = cls.objects.filter(team=team, fingerprint=cluster.fingerprint).first()
        if record is None and cluster.earlier_fingerprints:
            carried = {r.fingerprint: r for r in cls.objects.filter(team=team,
                                                                     fingerprint__in=cluster.earlier_fingerprints)}
            record = next((carried[fp] for fp in cluster.earlier_fingerprints if fp in carried), None)
            if record is not None:
                ClusterFingerprint.objects.get_or_create(team=team, fingerprint=record.fingerprint, defaults={
                    "cluster": record, "grouping_version": record.grouping_version})
                record.fingerprint, record.grouping_version = cluster.fingerprint, grouping.GROUPING_VERSION
                record.save(update_fields=["fingerprint", "grouping_version"])
        if record is None:
            # a fingerprint of an earlier grouping, or of a cluster merged into another: that one
            known = [cluster.fingerprint, *cluster.earlier_fingerprints]
            carried_to = {r.fingerprint: r.cluster for r in
                          ClusterFingerprint.objects.filter(team=team, fingerprint__in=known).select_related("cluster")}
            record = next((carried_to[fp] for fp in known if fp in carried_to), None)
        if record is not None:
            return record, False
        return cls.objects.get_or_create(team=team, fingerprint=cluster.fingerprint, defaults={
            "first_seen": trace.created_at, "last_seen": trace.created_at, "grouping_version": grouping.GROUPING_VERSION})


class ClusterFingerprint(models.Model):
    """A fingerprint that lands on a team's cluster other than its own: one it had under an
    earlier grouping version or root-cause name (reports of that grouping, recorded again, still
    land on it), or one of a cluster merged into it (diagnosis.cluster_merge: future occurrences
    land on it until the fingerprint is unmerged)."""
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=128)
    cluster = models.ForeignKey(ClusterRecord, on_delete=models.CASCADE, related_name="earlier")
    grouping_version = models.PositiveSmallIntegerField()
    # the merged cluster's fingerprint this one came with ("": not merged): unmerging it splits
    # every row of that fingerprint back out
    merged_from = models.CharField(max_length=128, blank=True, db_index=True)
    # the id the merged cluster had, so its old links lead to the cluster it is now part of
    merged_cluster_id = models.PositiveIntegerField(null=True, blank=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "fingerprint"], name="earlier_fingerprint_per_team")]

    def __str__(self) -> str:
        return f"{self.fingerprint} (v{self.grouping_version}) -> {self.cluster.fingerprint}"


def _shown(value) -> str:
    """A field value as the activity log keeps it."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    return getattr(value, "username", None) or str(value)


class ClusterActivity(models.Model):
    """One entry of a cluster's activity log: who changed what, and when (a null actor: the
    system, e.g. a trace that made it regress)."""

    class Kind(models.TextChoices):
        CREATED = "created"
        STATUS = "status"
        ASSIGNEE = "assignee"
        SNOOZE_UNTIL = "snooze_until"
        SNOOZE_COUNT = "snooze_count"
        COMMENT = "comment"
        MERGED = "merged"
        UNMERGED = "unmerged"

    cluster = models.ForeignKey(ClusterRecord, on_delete=models.CASCADE, related_name="activity")
    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    trace = models.ForeignKey(Trace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    old = models.CharField(max_length=200, blank=True)
    new = models.CharField(max_length=200, blank=True)
    text = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.kind} {self.old} -> {self.new}"


class ClusterSighting(models.Model):
    """A trace that saw a cluster, once per host the trace names ("" when it names none):
    when (the trace's received time) and where."""
    cluster = models.ForeignKey(ClusterRecord, on_delete=models.CASCADE, related_name="sightings")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="cluster_sightings")
    host = models.CharField(max_length=200, blank=True, db_index=True)
    seen_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-seen_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "trace", "host"], name="sighting_once_per_host")]


def trace_hosts(trace: Trace, report: Report) -> list[str]:
    """The hosts a trace names: the agent's `host` label and the hosts its events name."""
    names = set(report.trace.hosts)
    if trace.labels.get("host"):
        names.add(str(trace.labels["host"]))
    return sorted(n[:200] for n in names if n) or [""]


class FindingRecord(models.Model):
    """A finding of a trace's report, stored to list a cluster's findings across traces."""
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="findings")
    cluster = models.ForeignKey(ClusterRecord, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="findings")
    report_id = models.CharField(max_length=20)          # "F1": the id inside the report
    report_cluster = models.CharField(max_length=20, blank=True)  # "C1"
    # the report cluster's fingerprint: which findings leave when that fingerprint is unmerged
    fingerprint = models.CharField(max_length=128, blank=True)
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
    capture = models.JSONField(default=dict, blank=True)  # the capture that would decide it (CapturePlan)

    class Meta:
        ordering = ["trace", "start_ts", "id"]

    def __str__(self) -> str:
        return f"{self.report_id} {self.title}"

    @classmethod
    def from_result(cls, trace: Trace, f: Finding, cluster: ClusterRecord | None,
                    fingerprint: str = "") -> "FindingRecord":
        return cls(
            trace=trace, cluster=cluster, report_id=f.id, report_cluster=f.cluster or "", fingerprint=fingerprint,
            rule_id=f.rule_id,
            rule_version=int(f.rule_version or 1), title=f.title[:300], severity=f.severity,
            root_cause=f.root_cause, slo=f.slo or "", start_ts=f.start_ts, end_ts=f.end_ts,
            explanation=f.explanation, recommendations=list(f.recommendations), references=list(f.references),
            evidence=msgspec.to_builtins(f.evidence), metrics=json_values(f.metrics),
            consequence_of=f.consequence_of or "", capture=f.capture.to_dict() if f.capture else {})

    def to_result(self) -> Finding:
        return Finding(
            id=self.report_id, cluster=self.report_cluster or None, rule_id=self.rule_id,
            rule_version=self.rule_version, title=self.title, severity=self.severity, root_cause=self.root_cause,
            slo=self.slo or None, start_ts=self.start_ts or 0, end_ts=self.end_ts or 0,
            explanation=self.explanation, recommendations=tuple(self.recommendations),
            references=tuple(self.references),
            evidence=msgspec.convert(self.evidence, tuple[Evidence, ...], strict=False),
            metrics=self.metrics, consequence_of=self.consequence_of or None,
            capture=CapturePlan.from_dict(self.capture) if self.capture else None)


def record_report(trace: Trace, report: Report) -> list[ClusterTransition]:
    """Replace the trace's findings and sightings with the report's and link them to the
    team's clusters by fingerprint (clusters of `warning` and worse). Running it twice for one
    trace gives the same rows and counts, and the second run reports no new or regressed
    cluster. Listeners of `clusters_recorded` hear what happened once it is committed."""
    with transaction.atomic():
        before = set(trace.findings.exclude(cluster=None).values_list("cluster_id", flat=True))
        trace.findings.all().delete()
        trace.cluster_sightings.all().delete()
        records, transitions = {}, []
        for c in report.clusters:
            if not at_least(c.severity, CLUSTER_MIN_SEVERITY):
                continue
            record, happened = ClusterRecord.seen_in(trace, c, seen_before=before)
            records[c.id] = record
            key = {ClusterTransition.NEW: "new",
                   ClusterTransition.REGRESSED: f"regressed-{record.regressions}"}.get(happened, f"seen-{trace.pk}")
            transitions.append(ClusterTransition(record.pk, happened, trace.pk, key))
        fingerprints = {c.id: c.fingerprint for c in report.clusters}
        FindingRecord.objects.bulk_create(
            FindingRecord.from_result(trace, f, records.get(f.cluster), fingerprints.get(f.cluster or "", ""))
            for f in report.findings)
        hosts = trace_hosts(trace, report)
        ClusterSighting.objects.bulk_create(
            ClusterSighting(cluster=r, trace=trace, host=h, seen_at=trace.created_at)
            for r in {r.pk: r for r in records.values()}.values() for h in hosts)
        for record in ClusterRecord.objects.filter(pk__in=before | {c.pk for c in records.values()}):
            record.refresh_trace_count()
    clusters_recorded.send(sender=Trace, trace=trace, transitions=transitions)
    return transitions


class SLOQuerySet(models.QuerySet):
    def visible_to(self, user) -> "SLOQuerySet":
        return self.filter(team__in=Team.objects.of(user))

    def effective_for(self, team: Team) -> list:
        """The builtin SLOs with the team's enabled ones added; a team SLO with a builtin's
        id replaces it, a disabled one switches the builtin off."""
        merged = {s.id: s for s in load_slos()}
        for row in self.filter(team=team):
            if row.enabled:
                merged[row.slo_id] = row.as_slo()
            else:
                merged.pop(row.slo_id, None)
        return list(merged.values())


class SLODefinition(models.Model):
    """A team's SLO: a named SLI (diagnosis.engine.slis), an objective and a window."""
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
        return SLO(id=self.slo_id, title=self.title or self.slo_id, sli=self.sli, objective=self.objective,
                   window=self.window)

    def clean(self) -> None:
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


class RuleTrialQuerySet(models.QuerySet):
    def readable_by(self, user) -> "RuleTrialQuerySet":
        """The user's own trials, of a team they are still in, not expired: what the editor polls
        and the API reads (nothing for an anonymous user)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(user=user, team__in=Team.objects.of(user), expires_at__gt=timezone.now())


class RuleTrial(models.Model):
    """One run of the rule editor's "Test" or "Backtest" (diagnosis.rule_trial_runs), done by a
    worker on the diagnose queue while the editor polls it. It keeps no text of the rule (the
    task's message carries it): only its state, the result (the partial as rendered, and as
    JSON for the API) or the error, and for whom; it expires after an hour."""

    class Kind(models.TextChoices):
        TEST = "test"
        BACKTEST = "backtest"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    subject = models.CharField(max_length=300, blank=True)  # what it runs on, for the progress line
    html = models.TextField(blank=True)  # the result partial, once done (the editor's)
    result = models.JSONField(null=True, blank=True)  # the same result as JSON, once done (the API's)
    error = models.TextField(blank=True)  # why it failed: shown as such, never as findings
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)

    objects = RuleTrialQuerySet.as_manager()

    @property
    def finished(self) -> bool:
        return self.state in (self.State.DONE, self.State.FAILED)
