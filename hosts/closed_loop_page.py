"""What the pages show of the closed loop (hosts.closed_loop): on a cluster's page the capture
its rules declare, whether the team's policy takes it by itself, and the orders made for the
cluster with what each changed; on the trace page the orders a cluster has running.

Who may change the policy is the API's rule for a browser session (accounts.permissions): a
member of the cluster's team; an API token needs scope admin, and no page takes a token."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q

from accounts.models import Team
from diagnosis.models import ClusterRecord
from hosts.models import CapturePolicy, CaptureRequest
from hosts.order_outcome import Outcome, outcome_of
from rules.engine.capture_plans import TIMED_KINDS, CapturePlan
from rules.engine.loader import load_rule_dirs
from rules.models import TeamRule

ORDERS_SHOWN = 20


@dataclass(frozen=True)
class RulePlan:
    """A rule of the cluster that declares the capture that would decide its findings."""
    rule_id: str
    plan: CapturePlan
    opted_in: bool      # the team's policy names this rule
    still_asked: bool   # the cluster's latest finding of this rule still asks (its trace lacks the evidence)

    @property
    def facts(self) -> tuple[tuple[str, str], ...]:
        """The plan as the page lists it: what, when, within which bounds, on which hosts."""
        p = self.plan
        size = f"{p.steps} steps" if p.kind == "profiler" else f"{p.duration_s:g} s" if p.kind in TIMED_KINDS else None
        bounds = ", ".join(filter(None, [size, f"at most {p.max_bytes // (1024 * 1024)} MiB",
                                         f"waits up to {duration(p.wait_s)} for the occurrence"]))
        rows = [("Capture", CaptureRequest.Kind(p.kind).label), ("Taken", p.occasion()), ("Bounds", bounds),
                ("Hosts", "the hosts the finding names" if p.scope == "involved" else "every host of the trace")]
        if p.unless:
            rows.append(("Not asked", "when the trace already holds " + ", ".join(p.unless)))
        return tuple(rows)


@dataclass(frozen=True)
class OrderRow:
    order: CaptureRequest
    state: str  # CaptureRequest.state_word: queued | taken | done | failed | expired
    outcome: Outcome

    @property
    def outstanding(self) -> bool:
        return self.order.state in CaptureRequest.OUTSTANDING


@dataclass(frozen=True)
class ClosedLoopPanel:
    cluster: ClusterRecord
    plans: tuple[RulePlan, ...]
    policy: CapturePolicy
    cluster_opted_in: bool
    orders: tuple[OrderRow, ...]
    can_change: bool

    @property
    def on(self) -> bool:
        """The next finding of this cluster that asks orders its capture."""
        return self.policy.enabled and (self.cluster_opted_in or any(p.opted_in for p in self.plans))

    @property
    def shown(self) -> bool:
        return bool(self.plans or self.orders)

    @property
    def ttl(self) -> str:
        return duration(self.policy.order_ttl_s)

    @property
    def other_opt_ins(self) -> str:
        """What else turning the team's loop on starts: its other rules and clusters opted in."""
        if self.policy.pk is None:
            return ""
        rules = sorted(set(self.policy.rules) - {p.rule_id for p in self.plans})
        clusters = self.policy.clusters.exclude(pk=self.cluster.pk).count()
        parts = ([f"rule{'s' if len(rules) > 1 else ''} {', '.join(rules)}"] if rules else []) \
            + ([f"{clusters} other cluster{'s' if clusters > 1 else ''}"] if clusters else [])
        return " and ".join(parts)


def duration(seconds: float) -> str:
    """3600 -> '1 h', 90 -> '90 s', 172800 -> '2 days'."""
    if seconds >= 2 * 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g} days"
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    if seconds >= 120:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def can_change_policy(user, team: Team) -> bool:
    return Team.objects.of(user).filter(pk=team.pk).exists()


def declared_plans(team: Team, rule_ids: Iterable[str]) -> dict[str, CapturePlan]:
    """rule id -> the capture its rule declares, the team's rule of that id replacing the builtin."""
    wanted = set(rule_ids)
    rules = {r.id: r for r in load_rule_dirs(None) if r.id in wanted}
    if TeamRule.objects.filter(team=team, rule_id__in=wanted).exists():
        rules.update((r.id, r) for r in TeamRule.objects.loaded_for(team) if r.id in wanted)
    return {rid: plan for rid, rule in rules.items() if (plan := rule.capture_plan) is not None}


def panel(cluster: ClusterRecord, user) -> ClosedLoopPanel:
    rule_ids = set(cluster.findings.values_list("rule_id", flat=True).distinct())
    # a page never writes: a team that never opened its policy has the default one (off)
    policy = CapturePolicy.objects.filter(team=cluster.team).first() or CapturePolicy(team=cluster.team)
    plans = tuple(RulePlan(rid, plan, rid in policy.rules, _still_asked(cluster, rid))
                  for rid, plan in sorted(declared_plans(cluster.team, rule_ids).items()))
    orders = (cluster.capture_orders.filter(origin=CaptureRequest.Origin.AUTO)
              .select_related("host", "trace", "source_trace")[:ORDERS_SHOWN])
    return ClosedLoopPanel(
        cluster=cluster, plans=plans, policy=policy,
        cluster_opted_in=policy.pk is not None and policy.clusters.filter(pk=cluster.pk).exists(),
        orders=tuple(OrderRow(o, o.state_word, outcome_of(o)) for o in orders),
        can_change=can_change_policy(user, cluster.team))


def _still_asked(cluster: ClusterRecord, rule_id: str) -> bool:
    latest = cluster.findings.filter(rule_id=rule_id).order_by("-trace__created_at", "-id").first()
    return bool(latest and latest.capture)


def orders_for_trace(trace_id: int, cluster_ids: Iterable[int]) -> dict[int, list[OrderRow]]:
    """cluster id -> the closed-loop orders the trace page names under its findings: those this
    trace's findings made (any state) and those still outstanding for its clusters."""
    found: dict[int, list[OrderRow]] = defaultdict(list)
    ids = [pk for pk in cluster_ids if pk is not None]
    if not ids:
        return found
    orders = (CaptureRequest.objects.filter(cluster__in=ids, origin=CaptureRequest.Origin.AUTO)
              .filter(Q(state__in=CaptureRequest.OUTSTANDING) | Q(source_trace_id=trace_id))
              .select_related("host").order_by("-created_at")[:50])
    for o in orders:
        found[o.cluster_id].append(OrderRow(o, o.state_word, outcome_of(o)))
    return found

