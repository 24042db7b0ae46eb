"""What an alert says, whatever it is sent through: one typed value made from a cluster and
the trace that fired it, kept on the Alert as JSON so a retry sends the same words."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings
from django.urls import reverse

from diagnosis.models import ClusterRecord
from ingest.models import Trace


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
        what = {"new": "New", "regressed": "Regressed"}.get(self.trigger, f"{self.window_count} traces:")
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


def absolute(path: str) -> str:
    return settings.TRACEDOC_BASE_URL.rstrip("/") + path
