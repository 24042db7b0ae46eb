"""A cluster's activity log as the cluster page shows it: the stored changes (status,
assignee, snooze, comments, each with who and when) merged with the rule versions that
matched it, each at the first trace it matched in, and the closed loop's policy changes that
concern it (diagnosis.policy_activity, read from the audit log).

Rule matches are not stored as activity rows: they are already in the findings (rule id and
version per trace), so they are read from there and can never disagree with them. A trace
diagnosed again under a new rule version adds its line by itself."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Min

from diagnosis.models import ClusterActivity, ClusterRecord, FindingRecord
from diagnosis.policy_activity import PolicyChange, policy_changes
from ingest.models import Trace

MAX_ENTRIES = 200
MAX_RULE_VERSIONS = 50


@dataclass(frozen=True)
class RuleMatch:
    """Rule `rule_id` at `rule_version` found this cluster, first in `trace` (received `at`)."""
    at: datetime
    rule_id: str
    rule_version: int
    trace: Trace
    kind: str = "rule"
    actor: None = None

    @property
    def trace_id(self) -> int:
        return self.trace.pk


def rule_matches(cluster: ClusterRecord) -> list[RuleMatch]:
    """One entry per (rule, version) that matched the cluster, at the earliest trace."""
    findings = FindingRecord.objects.filter(cluster=cluster)
    versions = (findings.values("rule_id", "rule_version").annotate(first=Min("trace__created_at"))
                .order_by("rule_id", "rule_version")[:MAX_RULE_VERSIONS])
    out = []
    for v in versions:  # a cluster matches few rule versions: one small query each
        f = (findings.filter(rule_id=v["rule_id"], rule_version=v["rule_version"], trace__created_at=v["first"])
             .select_related("trace").order_by("trace_id").first())
        if f is not None:
            out.append(RuleMatch(f.trace.created_at, f.rule_id, f.rule_version, f.trace))
    return out


def activity_log(cluster: ClusterRecord, limit: int = MAX_ENTRIES) -> list[ClusterActivity | RuleMatch | PolicyChange]:
    """Newest first; a rule match sorts after a change made at the same instant."""
    stored: list[ClusterActivity | RuleMatch | PolicyChange] = list(cluster.activity.select_related("actor", "trace")[:limit])
    merged = sorted(stored + rule_matches(cluster) + policy_changes(cluster)[-limit:],
                    key=lambda a: (a.at, a.kind != "rule"), reverse=True)
    return merged[:limit]
