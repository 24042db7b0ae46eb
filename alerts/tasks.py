"""Alert tasks: `alerts.evaluate` (which rules a stored report fires), `alerts.deliver`
(one delivery, retried with exponential backoff; every attempt in the delivery's log) and the
beat job `alerts.resend_unqueued` (deliveries whose task the broker did not take)."""
from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from alerts.destinations import SENDERS, DeliveryError
from alerts.evaluate import fire
from alerts.message import AlertMessage
from alerts.models import Delivery
from alerts.redact import redact
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
    enqueue([d.pk for d in deliveries])
    return [d.pk for d in deliveries]


def enqueue(delivery_ids: list[int]) -> list[int]:
    """Queue a `deliver` task per delivery and mark those the broker took; one it refused
    (down) stays unqueued for `resend_unqueued`. Returns the ids queued."""
    queued = []
    for pk in delivery_ids:
        try:
            deliver.delay(pk)
        except Exception as e:  # kombu's OperationalError and friends: the broker is unreachable
            log.warning("alert delivery %s not queued (broker unreachable, the beat job sends it): %s", pk, e)
            continue
        queued.append(pk)
    Delivery.objects.filter(pk__in=queued, queued_at__isnull=True).update(queued_at=timezone.now())
    return queued


@shared_task(name="alerts.resend_unqueued")
def resend_unqueued(unsent_after_s: float | None = None) -> list[int]:
    """Beat job: queue the pending deliveries no broker took, once older than
    TRACEDOC_ALERT_UNSENT_AFTER_S (younger ones may still be on their way)."""
    age = settings.TRACEDOC_ALERT_UNSENT_AFTER_S if unsent_after_s is None else unsent_after_s
    ids = list(Delivery.objects.filter(state=Delivery.State.PENDING, queued_at__isnull=True,
                                       alert__created_at__lte=timezone.now() - timedelta(seconds=age))
               .order_by("pk").values_list("pk", flat=True)[:1000])
    return enqueue(ids)


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
        final = e.final or delivery.attempts + 1 >= settings.TRACEDOC_ALERT_MAX_ATTEMPTS
        error = redact(str(e), delivery.destination.url, delivery.destination.secret)  # senders' own texts too
        delivery.record(False, e.status, error, final=final)
        log.warning("alert delivery %s to %s failed (attempt %s): %s", delivery.pk, delivery.destination,
                    delivery.attempts, error)
        if final:
            return delivery.state
        raise self.retry(countdown=backoff_s(self.request.retries)) from None
    delivery.record(True, status)
    return delivery.state
