"""Which alert rules a stored report fires: one Alert per (rule, cluster, transition), with
one Delivery per enabled destination of the rule. A repeat of an open cluster fires no
new/regressed rule; a count rule fires once per window. A cluster only experimental rules
found (status: experimental, the team's rule or the builtin) never pages."""
from __future__ import annotations

from datetime import timedelta
from functools import lru_cache

from django.db import transaction

from alerts.message import AlertMessage
from alerts.models import Alert, AlertRule, Delivery
from diagnosis.models import ClusterRecord, ClusterSighting, ClusterTransition, FindingRecord
from ingest.models import Trace
from rules.engine.loader import load_rule_dirs
from rules.models import TeamRule


def fire(trace: Trace, transitions: list[ClusterTransition]) -> list[Delivery]:
    """The deliveries of the alerts that `transitions` (what storing `trace`'s report did)
    fired for the first time."""
    rules = list(AlertRule.objects.filter(team=trace.team, enabled=True)
                 .exclude(trigger=AlertRule.Trigger.AGENT_STALE)  # about hosts: alerts.agent_health
                 .prefetch_related("destinations"))
    clusters = ClusterRecord.objects.select_related("team").in_bulk([t.cluster_id for t in transitions])
    deliveries: list[Delivery] = []
    experimental = _experimental_only(trace, clusters.values()) if rules else set()
    for t in transitions:
        cluster = clusters.get(t.cluster_id)
        if cluster is None or cluster.pk in experimental:
            continue
        for rule in rules:
            if not rule.applies_to(cluster, trace):
                continue
            fired = _fired(rule, t, cluster, trace)
            if fired is None:
                continue
            key, window_count = fired
            deliveries += _alert(rule, cluster, trace, key, window_count)
    return deliveries


@lru_cache(maxsize=1)
def _builtin_status() -> dict[str, str]:
    return {r.id: r.status for r in load_rule_dirs(None)}


def _experimental_only(trace: Trace, clusters) -> set[int]:
    """The clusters whose findings in `trace` all come from experimental rules."""
    by_cluster: dict[int, set[str]] = {}
    for cluster_id, rule_id in FindingRecord.objects.filter(trace=trace, cluster__in=list(clusters)).values_list(
            "cluster_id", "rule_id"):
        by_cluster.setdefault(cluster_id, set()).add(rule_id)
    status = {**_builtin_status(), **{r.id: r.status for r in TeamRule.objects.loaded_for(trace.team)}}
    return {c for c, ids in by_cluster.items() if all(status.get(i) == "experimental" for i in ids)}


def _fired(rule: AlertRule, t: ClusterTransition, cluster: ClusterRecord, trace: Trace) -> tuple[str, int] | None:
    """(the alert's dedup key, traces in the window) when `rule` fires on `t`, else None."""
    if rule.trigger == AlertRule.Trigger.NEW:
        return (t.key, 0) if t.kind == ClusterTransition.NEW else None
    if rule.trigger == AlertRule.Trigger.REGRESSED:
        return (t.key, 0) if t.kind == ClusterTransition.REGRESSED else None
    window = timedelta(minutes=rule.window_minutes)
    count = (ClusterSighting.objects.filter(cluster=cluster, seen_at__gt=trace.created_at - window,
                                            seen_at__lte=trace.created_at).values("trace").distinct().count())
    if count < rule.threshold:
        return None
    return f"count-{int(trace.created_at.timestamp() // window.total_seconds())}", count


def _alert(rule: AlertRule, cluster: ClusterRecord, trace: Trace, key: str, window_count: int) -> list[Delivery]:
    with transaction.atomic():
        alert, created = Alert.objects.get_or_create(rule=rule, cluster=cluster, key=key, defaults={
            "trace": trace, "trigger": rule.trigger,
            "payload": AlertMessage.of(rule.trigger, rule.name, cluster, trace, window_count).to_dict()})
        if not created:
            return []
        return Delivery.objects.bulk_create(Delivery(alert=alert, destination=d)
                                            for d in rule.destinations.all() if d.enabled)
