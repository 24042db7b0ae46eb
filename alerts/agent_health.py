"""Stale agents: the beat job's check (alerts.tasks.check_agents) opens an outage for each agent
host whose heartbeats stopped (hosts.models.Host.stale: a few of its own intervals, at least a
minute) and closes it when a heartbeat comes again. Each opening fires the team's enabled
`agent_stale` rules once (one alert per host going stale), each closing a recovery notice; both
go to the rules' destinations through the same grouping as cluster alerts (alerts.tasks.enqueue).

Only teams with such a rule are watched: a rule added while a host is already quiet fires at the
next check."""
from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from alerts.message import AlertMessage, absolute
from alerts.models import AgentOutage, Alert, AlertRule, Delivery
from hosts.models import Host

STALE, RECOVERED = "agent_stale", "agent_recovered"


def check(now: datetime | None = None) -> list[Delivery]:
    """Open and close outages as the hosts' heartbeats say; the deliveries of the alerts fired."""
    now = now or timezone.now()
    rules: dict[int, list[AlertRule]] = {}
    for rule in (AlertRule.objects.filter(trigger=AlertRule.Trigger.AGENT_STALE, enabled=True)
                 .prefetch_related("destinations")):
        rules.setdefault(rule.team_id, []).append(rule)
    if not rules:
        return []
    open_outages = {o.host_id: o for o in AgentOutage.objects.filter(recovered_at=None, team__in=list(rules))}
    deliveries: list[Delivery] = []
    for host in Host.objects.filter(team__in=list(rules)).exclude(last_seen=None).select_related("team"):
        outage = open_outages.get(host.pk)
        quiet = now - host.last_seen > host.stale_after
        if quiet and outage is None:
            outage = _open(host, now)
            if outage is not None:
                deliveries += _fire(rules[host.team_id], host, outage, STALE)
        elif not quiet and outage is not None:
            with transaction.atomic():  # closed with its notice, or not at all (the next check tries again)
                outage.recovered_at = now
                outage.save(update_fields=["recovered_at"])
                deliveries += _fire(rules[host.team_id], host, outage, RECOVERED)
    return deliveries


def _open(host: Host, now: datetime) -> AgentOutage | None:
    """A new open outage, or None when a check running at the same time opened it first."""
    try:
        with transaction.atomic():
            return AgentOutage.objects.create(team=host.team, host=host, last_heartbeat=host.last_seen,
                                              stale_since=now)
    except IntegrityError:  # one_open_outage_per_host
        return None


def _fire(rules: list[AlertRule], host: Host, outage: AgentOutage, kind: str) -> list[Delivery]:
    key = f"{'stale' if kind == STALE else 'recovered'}-{outage.pk}"
    deliveries: list[Delivery] = []
    for rule in rules:
        with transaction.atomic():
            alert, created = Alert.objects.get_or_create(rule=rule, cluster=None, key=key, defaults={
                "trigger": kind, "payload": message(kind, rule.name, host, outage).to_dict()})
            if created:
                deliveries += Delivery.objects.bulk_create(Delivery(alert=alert, destination=d)
                                                           for d in rule.destinations.all() if d.enabled)
    return deliveries


def message(kind: str, rule: str, host: Host, outage: AgentOutage) -> AlertMessage:
    """What the on-call person reads: which host, since when, and a link to its page."""
    page = absolute(reverse("hosts:host-detail", args=[host.pk]))
    expected = f"every {host.heartbeat_interval:g} s"
    if kind == STALE:
        title = (f"Agent on {host.name} stopped sending heartbeats: last one at "
                 f"{outage.last_heartbeat:%Y-%m-%d %H:%M:%S %Z} (expected {expected})")
    else:
        quiet = int(((host.last_seen or outage.recovered_at) - outage.last_heartbeat).total_seconds())
        title = f"Agent on {host.name} is sending heartbeats again after {_duration(quiet)} without"
    return AlertMessage(
        trigger=kind, team=host.team.slug, cluster_id=0, fingerprint=f"agent-{host.pk}",
        title=title, root_cause="agent.stale", severity="warning" if kind == STALE else "info",
        status="open" if kind == STALE else "resolved", trace_count=0, window_count=0, hosts=(host.name,),
        labels={"host": host.name, "agent_version": host.agent_version}, first_seen=outage.last_heartbeat.isoformat(),
        last_seen=(host.last_seen or outage.last_heartbeat).isoformat(), cluster_url=page,
        trace_url=absolute(reverse("ingest:trace-detail", args=[host.last_trace_id])) if host.last_trace_id else page,
        rule=rule)


def _duration(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
