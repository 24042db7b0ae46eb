"""Alert tasks: `alerts.evaluate` (which rules a stored report fires) and `alerts.deliver`
(one delivery, retried with exponential backoff; every attempt in the delivery's log)."""
from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from alerts.destinations import SENDERS, DeliveryError
from alerts.evaluate import fire
from alerts.message import AlertMessage
from alerts.models import Delivery
from diagnosis.models import ClusterTransition
from ingest.models import Trace

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 3600


@shared_task(name="alerts.evaluate", acks_late=True)
def evaluate(trace_id: int, transitions: list[dict]) -> list[int]:
    """Fire the team's alert rules on what storing a trace's report did; queue a delivery
    per destination. Idempotent: an alert exists once per transition."""
    trace = Trace.objects.filter(pk=trace_id).select_related("team").first()
    if trace is None:
        return []
    deliveries = fire(trace, [ClusterTransition(**t) for t in transitions])
    for d in deliveries:
        deliver.delay(d.pk)
    return [d.pk for d in deliveries]


def backoff_s(retries: int) -> float:
    return min(MAX_BACKOFF_S, settings.TRACEDOC_ALERT_RETRY_BACKOFF_S * 2 ** retries)


@shared_task(name="alerts.deliver", bind=True, acks_late=True, max_retries=None)
def deliver(self, delivery_id: int) -> str:
    """Send one alert to one destination; a failure is retried after 1, 2, 4, ... times the
    backoff until TRACEDOC_ALERT_MAX_ATTEMPTS attempts, then the delivery is `failed`."""
    delivery = Delivery.objects.select_related("alert", "destination").filter(pk=delivery_id).first()
    if delivery is None or delivery.state != Delivery.State.PENDING:
        return delivery.state if delivery else "gone"  # a redelivered message of a finished delivery
    try:
        status = SENDERS[delivery.destination.kind](delivery.destination, AlertMessage.from_dict(delivery.alert.payload))
    except DeliveryError as e:
        final = delivery.attempts + 1 >= settings.TRACEDOC_ALERT_MAX_ATTEMPTS
        delivery.record(False, e.status, str(e), final=final)
        log.warning("alert delivery %s to %s failed (attempt %s): %s", delivery.pk, delivery.destination,
                    delivery.attempts, e)
        if final:
            return delivery.state
        raise self.retry(countdown=backoff_s(self.request.retries)) from None
    delivery.record(True, status)
    return delivery.state
