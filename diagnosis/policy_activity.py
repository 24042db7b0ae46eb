"""The closed loop's policy changes that concern one cluster, for its activity log: who opted
this cluster or one of its rules in or out, and who turned the team's loop on or off while
the cluster was opted in, and when.

Read from the audit log (accounts.audit records every change of hosts.CapturePolicy, its
clusters included), not stored again: the two can never disagree. The policy is named by
label: hosts sits above diagnosis."""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from accounts.models import AuditEntry
from diagnosis.models import ClusterRecord, FindingRecord

POLICY = "hosts.CapturePolicy"
MAX_POLICY_ENTRIES = 500   # the team's latest policy changes read for one cluster page


@dataclass(frozen=True)
class PolicyChange:
    at: datetime
    actor: str | None   # the username kept by the audit entry; None: tracedoc itself
    text: str           # "opted this cluster in", "opted rule latency.jitter out", ...
    kind: str = "closed_loop"


def _ids(side) -> list:
    """A JSON field's list as stored, or a many-to-many field's ids as a JSON string."""
    if isinstance(side, str):
        try:
            side = json.loads(side)
        except ValueError:
            return []
    return list(side) if isinstance(side, list) else []


def _pair(changes: dict, field: str) -> tuple[list, list] | None:
    value = changes.get(field)
    if not isinstance(value, list) or len(value) != 2:
        return None
    return _ids(value[0]), _ids(value[1])


def _opt_texts(entry: AuditEntry, cluster_id: int, rule_ids: set[str]) -> list[str]:
    texts = []
    if (clusters := _pair(entry.changes, "clusters")) is not None:
        before, after = ({int(c) for c in side if str(c).isdigit()} for side in clusters)
        if cluster_id in after - before:
            texts.append("opted this cluster in")
        elif cluster_id in before - after:
            texts.append("opted this cluster out")
    if (rules := _pair(entry.changes, "rules")) is not None:
        before, after = set(rules[0]), set(rules[1])
        texts += [f"opted rule {r} in" for r in sorted((after - before) & rule_ids)]
        texts += [f"opted rule {r} out" for r in sorted((before - after) & rule_ids)]
    return texts


def _enabled_text(entry: AuditEntry) -> str | None:
    enabled = entry.changes.get("enabled")
    if not isinstance(enabled, list) or len(enabled) != 2 or str(enabled[0]) == str(enabled[1]):
        return None
    return "turned the team's closed loop " + ("on" if str(enabled[1]) in ("True", "true") else "off")


def policy_changes(cluster: ClusterRecord) -> list[PolicyChange]:
    """Oldest first. The team's loop turned on or off shows once the cluster has been opted in
    (by itself or by one of its rules): before that it did not order for this cluster."""
    rule_ids = set(FindingRecord.objects.filter(cluster=cluster).values_list("rule_id", flat=True).distinct())
    entries = list(AuditEntry.objects.filter(team_id=cluster.team_id, object_type=POLICY)
                   .order_by("-at", "-id")[:MAX_POLICY_ENTRIES])
    out, involved = [], False
    for entry in reversed(entries):
        texts = _opt_texts(entry, cluster.pk, rule_ids)
        involved = involved or bool(texts)
        if involved and (enabled := _enabled_text(entry)):
            texts.append(enabled)
        out += [PolicyChange(entry.at, entry.actor_name or None, text) for text in texts]
    return out
