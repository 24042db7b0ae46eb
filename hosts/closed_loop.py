"""The closed loop: a finding that says which capture would decide it orders that capture from
the agents of the hosts involved, and the capture's trace is diagnosed with the finding's.

    stored report --(clusters_recorded)--> order_captures(trace)
        a finding with a capture plan, whose cluster or rule the team opted in
        -> one CaptureRequest per involved agent host, within the CapturePolicy's limits
    heartbeat --> the agent writes the order for the program-side hook (agent.hook), which takes
        the capture at the next occurrence (the next slow step, the next stall, the next OOM)
    the capture's bundle --> a trace that `adds_to` the finding's trace (hosts.receipts.link):
        diagnosed with its files, then record_outcome() says what changed (before -> after)

Every decision not to order is logged with its reason; nothing here raises into the report
storage that sent the signal.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from diagnosis.models import FindingRecord
from hosts.models import CapturePolicy, CaptureRequest, Host
from ingest.models import Trace
from rules.engine.capture_plans import CapturePlan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    """One (finding, host) the loop looked at: the order it made, or why it made none."""
    rule_id: str
    host: str
    order: CaptureRequest | None = None
    skipped: str = ""


def order_captures(trace: Trace, now=None) -> list[Decision]:
    """Orders for the findings of a stored report that carry a capture plan."""
    if (trace.labels or {}).get("capture_request"):
        return []  # a capture answering an order: its diagnosis is the outcome, not a new question
    policy = CapturePolicy.objects.filter(team=trace.team, enabled=True).first()
    if policy is None:
        return []
    now = now or timezone.now()
    decisions = []
    asked = (trace.findings.exclude(cluster=None).exclude(capture={})
             .select_related("cluster").order_by("start_ts", "id"))
    seen = set()
    for finding in asked:
        if finding.cluster_id in seen:
            continue  # one question per cluster and trace: its first finding asks it
        seen.add(finding.cluster_id)
        if not policy.opted_in(finding.cluster_id, finding.rule_id):
            decisions.append(Decision(finding.rule_id, "", skipped="neither the cluster nor the rule is opted in"))
            continue
        plan = CapturePlan.from_dict(finding.capture)
        for host in _hosts(trace, finding, plan):
            decisions.append(_order(policy, trace, finding, plan, host, now))
    for d in decisions:
        log.info("closed loop, trace %s, %s on %s: %s", trace.pk, d.rule_id, d.host or "-",
                 f"ordered capture {d.order.pk}" if d.order else f"no order ({d.skipped})")
    return decisions


def _hosts(trace: Trace, finding: FindingRecord, plan: CapturePlan) -> list[Host]:
    """The team's agent hosts the plan's scope names: the finding's own host where it has one
    and the scope is `involved`, else every host the trace names."""
    names = {str(trace.labels["host"])} if (trace.labels or {}).get("host") else set()
    names |= {str(s.host) for s in trace.cluster_sightings.all() if s.host}
    own = (finding.metrics or {}).get("host")
    if plan.scope == "involved" and own:
        names = {str(own)}
    return list(Host.objects.filter(team=trace.team, name__in=names, last_seen__isnull=False).order_by("name"))


def _order(policy: CapturePolicy, trace: Trace, finding: FindingRecord, plan: CapturePlan, host: Host,
           now) -> Decision:
    with transaction.atomic():
        Host.objects.select_for_update().filter(pk=host.pk).first()  # one decision per host at a time
        orders = CaptureRequest.objects.filter(host=host)
        if orders.filter(cluster=finding.cluster, state__in=CaptureRequest.OUTSTANDING).exists():
            return Decision(finding.rule_id, host.name, skipped="an order for this cluster and host is outstanding")
        auto = orders.filter(origin=CaptureRequest.Origin.AUTO)
        if auto.filter(created_at__gte=now - timedelta(hours=1)).count() >= policy.max_per_host_per_hour:
            return Decision(finding.rule_id, host.name,
                            skipped=f"host rate limit: {policy.max_per_host_per_hour} order(s) in the last hour")
        if (CaptureRequest.objects.filter(cluster=finding.cluster, origin=CaptureRequest.Origin.AUTO,
                                          created_at__gte=now - timedelta(days=1)).count()
                >= policy.max_per_cluster_per_day):
            return Decision(finding.rule_id, host.name,
                            skipped=f"cluster rate limit: {policy.max_per_cluster_per_day} order(s) in the last day")
        order = CaptureRequest.objects.create(
            team=trace.team, host=host, kind=plan.kind, steps=plan.steps, trigger=plan.trigger,
            plan=plan.to_dict(), origin=CaptureRequest.Origin.AUTO, cluster=finding.cluster,
            rule_id=finding.rule_id, source_trace=trace,
            expires_at=now + timedelta(seconds=min(policy.order_ttl_s, plan.wait_s)),
            before=_finding_summary(finding))
    return Decision(finding.rule_id, host.name, order=order)


def _finding_summary(f: FindingRecord) -> dict:
    return {"trace": f.trace_id, "finding": f.report_id, "rule_id": f.rule_id, "title": f.title,
            "root_cause": f.root_cause, "severity": f.severity, "explanation": f.explanation[:1000]}


def record_outcome(trace: Trace) -> CaptureRequest | None:
    """The capture's trace is diagnosed: keep on its order what the diagnosis now says about the
    question it answered. `after.decided` is False when the finding that asked is still there
    with its question open."""
    order = (CaptureRequest.objects.filter(trace=trace, origin=CaptureRequest.Origin.AUTO)
             .exclude(source_trace=None).first())
    if order is None:
        return None
    asked = order.before.get("rule_id", "")
    earlier = set(FindingRecord.objects.filter(trace=order.source_trace).values_list("rule_id", flat=True))
    findings = list(trace.findings.order_by("start_ts", "id"))
    still_open = any(f.rule_id == asked and f.capture and not f.consequence_of for f in findings)
    new = [_finding_summary(f) for f in findings if f.rule_id not in earlier and not f.consequence_of]
    explained_by = next((f for f in findings if f.rule_id == asked and f.consequence_of), None)
    order.after = {"trace": trace.pk, "decided": not still_open and bool(new), "findings": new[:10],
                   "explained_by": explained_by.consequence_of if explained_by else ""}
    order.save(update_fields=["after"])
    return order
