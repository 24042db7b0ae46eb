"""Prometheus Alertmanager v2: `POST <url>/api/v2/alerts` with a list of alerts whose labels
identify the cluster (so Alertmanager groups and silences them) and whose annotations say
what happened."""
from __future__ import annotations

from alerts.destinations.http import body_of, post
from alerts.message import AlertDigest, AlertMessage

PATH = "/api/v2/alerts"


def payload(message: AlertMessage | AlertDigest) -> list[dict]:
    if isinstance(message, AlertDigest):  # Alertmanager takes a list: one alert per cluster
        return [a for m in message.messages for a in payload(m)]
    recovered = message.trigger == "agent_recovered"  # the same alert as its going stale, now ended
    labels = {"alertname": "TracedocAgentStale" if message.trigger.startswith("agent_") else "TracedocCluster",
              "team": message.team, "fingerprint": message.fingerprint,
              "severity": "warning" if recovered else message.severity, "root_cause": message.root_cause,
              "trigger": "agent_stale" if recovered else message.trigger}
    if message.hosts:
        labels["host"] = ",".join(message.hosts)
    return [{"labels": labels,
             "annotations": {"summary": message.summary, "title": message.title,
                             "trace_count": str(message.trace_count), "cluster_url": message.cluster_url,
                             "trace_url": message.trace_url},
             "startsAt": message.first_seen if recovered else message.last_seen, "generatorURL": message.cluster_url,
             **({"endsAt": message.last_seen} if recovered else {})}]


def send(destination, message: AlertMessage) -> int:
    url = destination.url.rstrip("/")
    return post(url if url.endswith(PATH) else url + PATH, body_of(payload(message)))
