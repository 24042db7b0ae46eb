"""PagerDuty Events API v2: a `trigger` event deduplicated by the cluster's fingerprint, so
PagerDuty folds repeats of one cluster into one incident."""
from __future__ import annotations

from alerts.destinations.http import body_of, post
from alerts.message import AlertMessage

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"


def payload(routing_key: str, message: AlertMessage) -> dict:
    # an agent back resolves the incident its going stale opened (same dedup key)
    action = "resolve" if message.trigger == "agent_recovered" else "trigger"
    return {"routing_key": routing_key, "event_action": action,
            "dedup_key": f"tracedoc-{message.team}-{message.fingerprint}"[:255],
            "payload": {"summary": message.summary[:1024], "source": ", ".join(message.hosts) or "tracedoc",
                        "severity": message.severity,  # PagerDuty's four are tracedoc's four
                        "component": message.root_cause, "group": message.team, "class": message.trigger,
                        "custom_details": {"trace_count": message.trace_count, "root_cause": message.root_cause,
                                           "labels": message.labels, "rule": message.rule}},
            "links": [{"href": message.cluster_url, "text": "tracedoc cluster"},
                      {"href": message.trace_url, "text": "trace"}]}


def send(destination, message: AlertMessage) -> int:
    return post(destination.url or EVENTS_URL, body_of(payload(destination.secret, message)))
