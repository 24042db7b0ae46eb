"""Merge and unmerge of a team's clusters, as in an error tracker.

Merging folds clusters into a target: their findings, sightings, activity and alerts move to
it, their fingerprints (and the ones they carried) become ClusterFingerprint rows of the
target, so future occurrences land there, and the merged clusters are gone (their old links
lead to the target). Unmerging one such fingerprint splits it back out: a cluster of its own
with the findings recorded under it (FindingRecord.fingerprint) and their traces' sightings.

Both are logged in the clusters' activity and in the audit log with who did it.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.apps import apps
from django.db import transaction
from django.db.models import Max, Min

from accounts.audit import acting_as, record_change
from accounts.models import AuditEntry
from diagnosis.models import ClusterActivity, ClusterFingerprint, ClusterRecord, ClusterSighting, FindingRecord
from rules.engine.severity import RANK

MAX_MERGE = 50  # clusters folded in one merge


class MergeRefused(ValueError):
    """A merge or unmerge that cannot be done (other team, itself, a fingerprint not merged)."""


@dataclass(frozen=True)
class MergedFingerprint:
    """A fingerprint merged into a cluster, as its page lists it: unmerging it splits it out."""
    fingerprint: str
    findings: int


def merged_fingerprints(cluster: ClusterRecord) -> list[MergedFingerprint]:
    names = sorted(set(cluster.earlier.exclude(merged_from="").values_list("merged_from", flat=True)))
    counts = {}
    for name in names:
        carried = [name, *cluster.earlier.filter(merged_from=name).values_list("fingerprint", flat=True)]
        counts[name] = cluster.findings.filter(fingerprint__in=carried).count()
    return [MergedFingerprint(n, counts[n]) for n in names]


def merge(target: ClusterRecord, sources: list[ClusterRecord], actor) -> ClusterRecord:
    """Fold `sources` into `target` (all of one team); returns the target, refreshed."""
    sources = [s for s in sources if s.pk != target.pk]
    if not sources:
        raise MergeRefused("pick at least one other cluster to merge")
    if len(sources) > MAX_MERGE:
        raise MergeRefused(f"at most {MAX_MERGE} clusters in one merge")
    if any(s.team_id != target.team_id for s in sources):
        raise MergeRefused("clusters of different teams cannot be merged")
    with transaction.atomic():
        locked = {c.pk: c for c in ClusterRecord.objects.select_for_update().filter(
            pk__in=[target.pk, *(s.pk for s in sources)])}
        if len(locked) != len(sources) + 1:
            raise MergeRefused("a cluster to merge no longer exists (merged meanwhile?)")
        target = locked[target.pk]
        for source in (locked[s.pk] for s in sources):
            _fold(target, source, actor)
        target.refresh_trace_count()
    return target


def _fold(target: ClusterRecord, source: ClusterRecord, actor) -> None:
    ClusterFingerprint.objects.filter(cluster=source, merged_from="").update(
        cluster=target, merged_from=source.fingerprint)
    ClusterFingerprint.objects.filter(cluster=source).update(cluster=target)  # merged into it before
    ClusterFingerprint.objects.create(team=target.team, fingerprint=source.fingerprint, cluster=target,
                                      grouping_version=source.grouping_version, merged_from=source.fingerprint,
                                      merged_cluster_id=source.pk)
    FindingRecord.objects.filter(cluster=source).update(cluster=target)
    ClusterSighting.objects.bulk_create(
        [ClusterSighting(cluster=target, trace_id=s.trace_id, host=s.host, seen_at=s.seen_at)
         for s in source.sightings.all()], ignore_conflicts=True)
    source.activity.update(cluster=target)
    _move_listeners(target, source)
    target.first_seen = min(target.first_seen, source.first_seen)
    target.last_seen = max(target.last_seen, source.last_seen)
    target.regressions += source.regressions
    if RANK.get(source.severity, -1) > RANK.get(target.severity, -1):
        target.severity = source.severity
    target.save(update_fields=["first_seen", "last_seen", "regressions", "severity"])
    ClusterActivity.objects.create(cluster=target, actor=actor, kind=ClusterActivity.Kind.MERGED,
                                   old=source.fingerprint[:200], new=target.fingerprint[:200],
                                   text=f"#{source.pk} {source.title}"[:500])
    record_change(target, AuditEntry.Action.UPDATED,
                  {"merged": [None, f"#{source.pk} {source.fingerprint} ({source.title})"[:300]]}, actor=actor)
    with acting_as(actor):  # the audit log's "deleted" entry names who merged it
        source.delete()


def _move_listeners(target: ClusterRecord, source: ClusterRecord) -> None:
    """Alerts and capture orders of the merged cluster go with it (an alert the target already
    fired for the same rule and transition stays with the source and goes with it), and a
    capture policy that opted the source in opts the target in. Named by label: hosts and
    alerts sit above diagnosis."""
    fired = set(target.alerts.values_list("rule_id", "key"))
    movable = [a.pk for a in source.alerts.all() if (a.rule_id, a.key) not in fired]
    source.alerts.filter(pk__in=movable).update(cluster=target)
    source.capture_orders.update(cluster=target)
    through = apps.get_model("hosts", "CapturePolicy").clusters.through
    for policy_id in through.objects.filter(clusterrecord_id=source.pk).values_list("capturepolicy_id", flat=True):
        through.objects.get_or_create(capturepolicy_id=policy_id, clusterrecord_id=target.pk)


def unmerge(cluster: ClusterRecord, fingerprint: str, actor) -> ClusterRecord:
    """Split `fingerprint` (merged into `cluster`) back out; returns the new cluster."""
    with transaction.atomic():
        cluster = ClusterRecord.objects.select_for_update().get(pk=cluster.pk)
        rows = list(ClusterFingerprint.objects.filter(cluster=cluster, merged_from=fingerprint))
        if not rows:
            raise MergeRefused(f"{fingerprint!r} is not merged into this cluster")
        carried = {r.fingerprint for r in rows}
        findings = cluster.findings.filter(fingerprint__in=carried)
        latest = findings.select_related("trace").order_by("-trace__created_at", "-id").first()
        own = next(r for r in rows if r.fingerprint == fingerprint)
        split = ClusterRecord.objects.create(
            team=cluster.team, fingerprint=fingerprint, grouping_version=own.grouping_version,
            title=(latest.title if latest else cluster.title)[:300],
            root_cause=latest.root_cause if latest else cluster.root_cause,
            severity=latest.severity if latest else cluster.severity, why_grouped=cluster.why_grouped)
        ClusterFingerprint.objects.filter(pk=own.pk).delete()
        ClusterFingerprint.objects.filter(pk__in=[r.pk for r in rows if r.pk != own.pk]).update(
            cluster=split, merged_from="", merged_cluster_id=None)
        traces = set(findings.values_list("trace_id", flat=True))
        findings.update(cluster=split)
        sightings = cluster.sightings.filter(trace_id__in=traces)
        ClusterSighting.objects.bulk_create(
            [ClusterSighting(cluster=split, trace_id=s.trace_id, host=s.host, seen_at=s.seen_at) for s in sightings],
            ignore_conflicts=True)
        still = set(cluster.findings.filter(trace_id__in=traces).values_list("trace_id", flat=True))
        cluster.sightings.filter(trace_id__in=traces - still).delete()
        seen = split.sightings.aggregate(first=Min("seen_at"), last=Max("seen_at"))
        if seen["first"] is not None:
            split.first_seen, split.last_seen = seen["first"], seen["last"]
            split.save(update_fields=["first_seen", "last_seen"])
        split.refresh_trace_count()
        cluster.refresh_trace_count()
        ClusterActivity.objects.bulk_create([
            ClusterActivity(cluster=cluster, actor=actor, kind=ClusterActivity.Kind.UNMERGED,
                            old=fingerprint[:200], new=fingerprint[:200], text=f"split out as #{split.pk}"),
            ClusterActivity(cluster=split, actor=actor, kind=ClusterActivity.Kind.UNMERGED,
                            old=cluster.fingerprint[:200], new=fingerprint[:200],
                            text=f"split out of #{cluster.pk} {cluster.title}"[:500])])
        record_change(cluster, AuditEntry.Action.UPDATED,
                      {"unmerged": [fingerprint[:200], f"#{split.pk}"]}, actor=actor)
    return split


def merged_into(team_ids, cluster_id: int) -> ClusterRecord | None:
    """The cluster that a merged cluster's id now belongs to (its old links lead there)."""
    row = (ClusterFingerprint.objects.filter(team_id__in=team_ids, merged_cluster_id=cluster_id)
           .select_related("cluster").first())
    return row.cluster if row is not None else None
