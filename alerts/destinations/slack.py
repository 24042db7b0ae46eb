"""Slack incoming webhook: `text` (notifications, fallback) and Block Kit blocks."""
from __future__ import annotations

from alerts.destinations.http import body_of, post
from alerts.message import AlertDigest, AlertMessage


def payload(message: AlertMessage | AlertDigest) -> dict:
    if isinstance(message, AlertDigest):  # one line per alert, each linked
        lines = [f"• <{m.cluster_url}|{m.summary}>" for m in message.messages]
        return {"text": f"{message.summary} <{message.cluster_url}|open>",
                "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                        "text": f"*<{message.cluster_url}|{message.summary}>*"}},
                           {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:2900]}}]}
    facts = [f"*Severity:* {message.severity}", f"*Root cause:* `{message.root_cause}`",
             f"*Traces:* {message.trace_count}", f"*Hosts:* {', '.join(message.hosts) or '—'}"]
    return {"text": f"{message.summary} <{message.cluster_url}|open>",
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": f"*<{message.cluster_url}|{message.summary}>*"}},
                {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in facts]},
                {"type": "context", "elements": [{"type": "mrkdwn",
                                                  "text": f"team {message.team} · rule {message.rule} · "
                                                          f"<{message.trace_url}|trace>"}]}]}


def send(destination, message: AlertMessage) -> int:
    return post(destination.url, body_of(payload(message)))
