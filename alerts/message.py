"""What an alert says, whatever it is sent through: one typed value made from a cluster and
the trace that fired it, kept on the Alert as JSON so a retry sends the same words."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from django.conf import settings
from django.urls import reverse

from diagnosis.models import ClusterRecord
from ingest.models import Trace
from rules.engine.severity import RANK


AGENT_TRIGGERS = {"agent_stale": "Stale agent:", "agent_recovered": "Recovered:"}  # alerts.agent_health


@dataclass(frozen=True)
class AlertMessage:
    trigger: str          # new, regressed, count
    team: str
    cluster_id: int
    fingerprint: str
    title: str
    root_cause: str
    severity: str
    status: str
    trace_count: int      # traces the cluster was seen in, all time
    window_count: int     # traces within the rule's window (count rule), else 0
    hosts: tuple[str, ...]
    labels: dict
    first_seen: str
    last_seen: str
    cluster_url: str
    trace_url: str
    rule: str

    @property
    def summary(self) -> str:
        if self.trigger in AGENT_TRIGGERS:  # about a host, not a cluster: no trace count
            return f"[{self.severity}] {AGENT_TRIGGERS[self.trigger]} {self.title}"
        what = {"new": "New", "regressed": "Regressed", "test": "Test:"}.get(self.trigger, f"{self.window_count} traces:")
        where = f" on {', '.join(self.hosts)}" if self.hosts else ""
        return f"[{self.severity}] {what} {self.title}{where} ({self.trace_count} trace{'s' if self.trace_count != 1 else ''})"

    def to_dict(self) -> dict:
        return {**asdict(self), "hosts": list(self.hosts), "summary": self.summary}

    @classmethod
    def from_dict(cls, d: dict) -> "AlertMessage":
        fields = {k: d[k] for k in cls.__dataclass_fields__}
        return cls(**{**fields, "hosts": tuple(fields["hosts"])})

    @classmethod
    def of(cls, trigger: str, rule: str, cluster: ClusterRecord, trace: Trace, window_count: int = 0) -> "AlertMessage":
        hosts = tuple(sorted(set(cluster.sightings.filter(trace=trace).exclude(host="").values_list("host", flat=True))))
        return cls(trigger=trigger, team=cluster.team.slug, cluster_id=cluster.pk, fingerprint=cluster.fingerprint,
                   title=cluster.title, root_cause=cluster.root_cause, severity=cluster.severity,
                   status=cluster.status, trace_count=cluster.trace_count, window_count=window_count, hosts=hosts,
                   labels=dict(trace.labels), first_seen=cluster.first_seen.isoformat(),
                   last_seen=cluster.last_seen.isoformat(),
                   cluster_url=absolute(reverse("diagnosis:cluster-detail", args=[cluster.pk])),
                   trace_url=absolute(reverse("ingest:trace-detail", args=[trace.pk])), rule=rule)


def absolute(path: str, base_url: str | None = None) -> str:
    """A link for people: the request's base URL where there is one, else TRACEDOC_BASE_URL."""
    return (base_url or settings.TRACEDOC_BASE_URL).rstrip("/") + path


@dataclass(frozen=True)
class AlertDigest:
    """Several alerts to one destination in one notification (its group wait or repeat
    interval gathered them). It answers what a sender reads of an AlertMessage (the worst
    severity, a summary naming the count) and carries every alert in `messages`."""
    messages: tuple[AlertMessage, ...]
    trigger = "digest"
    cluster_id = 0
    status = "open"
    window_count = 0
    labels = property(lambda self: {})  # a digest has no one trace's labels

    @property
    def first(self) -> AlertMessage:
        return self.messages[0]

    team = property(lambda self: self.first.team)
    severity = property(lambda self: max((m.severity for m in self.messages), key=lambda s: RANK.get(s, 0)))
    fingerprint = property(lambda self: "digest-" + self.first.fingerprint)
    root_cause = property(lambda self: ", ".join(sorted({m.root_cause for m in self.messages if m.root_cause})))
    rule = property(lambda self: ", ".join(sorted({m.rule for m in self.messages})))
    hosts = property(lambda self: tuple(sorted({h for m in self.messages for h in m.hosts})))
    trace_count = property(lambda self: len({m.trace_url for m in self.messages}))
    first_seen = property(lambda self: min(m.first_seen for m in self.messages))
    last_seen = property(lambda self: max(m.last_seen for m in self.messages))
    trace_url = property(lambda self: self.first.trace_url)

    @property
    def cluster_url(self) -> str:
        """The issue stream, where all of them are."""
        return self.first.cluster_url.rsplit("/clusters/", 1)[0] + reverse("diagnosis:cluster-list")

    @property
    def title(self) -> str:
        return "; ".join(m.title for m in self.messages[:5]) + ("; …" if len(self.messages) > 5 else "")

    @property
    def summary(self) -> str:
        kinds = {}
        for m in self.messages:
            kinds[m.trigger] = kinds.get(m.trigger, 0) + 1
        what = ", ".join(f"{n} {k}" for k, n in kinds.items())
        return f"[{self.severity}] {len(self.messages)} alerts ({what}): {self.title}"

    def to_dict(self) -> dict:
        return {"summary": self.summary, "team": self.team, "severity": self.severity, "trigger": self.trigger,
                "count": len(self.messages), "cluster_url": self.cluster_url,
                "alerts": [m.to_dict() for m in self.messages]}


def trial_message(destination_name: str, team: str, base_url: str) -> AlertMessage:
    """What a destination's "Send test" sends: a made-up cluster, links to this tracedoc."""
    now = datetime.now(timezone.utc).isoformat()
    stream = absolute(reverse("diagnosis:cluster-list"), base_url)
    return AlertMessage(trigger="test", team=team, cluster_id=0, fingerprint="tracedoc-test", title=(
        f"Test notification to {destination_name}: nothing is wrong"), root_cause="tracedoc.test", severity="info",
        status="open", trace_count=0, window_count=0, hosts=(), labels={}, first_seen=now, last_seen=now,
        cluster_url=stream, trace_url=stream, rule="send test")
