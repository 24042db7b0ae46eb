"""One module per kind of destination, each with `send(destination, message)`: it returns the
HTTP status (None for email) or raises `DeliveryError` (alerts.tasks retries it)."""
from __future__ import annotations

from typing import Callable

from alerts.destinations import alertmanager, email, pagerduty, slack, webhook
from alerts.destinations.http import DeliveryError
from alerts.message import AlertMessage
from alerts.models import Destination

SENDERS: dict[str, Callable[[Destination, AlertMessage], int | None]] = {
    Destination.Kind.WEBHOOK: webhook.send,
    Destination.Kind.SLACK: slack.send,
    Destination.Kind.ALERTMANAGER: alertmanager.send,
    Destination.Kind.PAGERDUTY: pagerduty.send,
    Destination.Kind.EMAIL: email.send,
}

__all__ = ["SENDERS", "DeliveryError"]
