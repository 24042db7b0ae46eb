"""Alert tasks: `alerts.evaluate` (which rules a stored report fires), `alerts.deliver`
(one notification to one destination, retried with exponential backoff; every attempt in the
deliveries' logs) and the beat jobs `alerts.resend_unqueued` (deliveries whose task the broker
did not take) and `alerts.check_agents` (agents gone stale or back: alerts.agent_health).

Grouping, as Grafana's notification policies: the first delivery to a quiet destination leads
a group and is sent after the destination's group wait (or, when it was notified lately, once
its repeat interval has passed since); deliveries queued to it meanwhile join the group, with
no task of their own, and go in the leader's one notification (alerts.message.AlertDigest when
there are several). Ten new clusters within a minute: one notification."""
from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from alerts import agent_health
from alerts.destinations import SENDERS, DeliveryError
from alerts.evaluate import fire
from alerts.message import AlertDigest, AlertMessage
from alerts.models import Delivery, Destination
from alerts.redact import redact
from diagnosis.models import ClusterTransition
from ingest.models import Trace

log = logging.getLogger(__name__)
MAX_BACKOFF_S = 3600
MAX_GROUP = 200  # alerts in one notification; more wait for the next


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
    """Queue each delivery: it joins the group waiting for its destination, or leads a new
    one with a `deliver` task due after the group wait (or the repeat interval). One the broker
    refused (down) stays unqueued for `resend_unqueued`. Returns the ids queued."""
    queued = []
    for d in Delivery.objects.filter(pk__in=delivery_ids).select_related("destination").order_by("pk"):
        # marked first: a leader gathering its group now takes it along
        Delivery.objects.filter(pk=d.pk).update(queued_at=timezone.now())
        if _group_waiting(d):
            queued.append(d.pk)
            continue
        try:
            _schedule(d.pk, _wait_s(d.destination))
        except Exception as e:  # kombu's OperationalError and friends: the broker is unreachable
            Delivery.objects.filter(pk=d.pk).update(queued_at=None)
            log.warning("alert delivery %s not queued (broker unreachable, the beat job sends it): %s", d.pk, e)
            continue
        queued.append(d.pk)
    return queued


def _schedule(pk: int, wait_s: float) -> None:
    if wait_s > 0:
        deliver.apply_async((pk,), countdown=wait_s)
    else:
        deliver.delay(pk)


def _group_waiting(d: Delivery) -> bool:
    """Whether another queued, unsent delivery to the destination will carry this one."""
    return Delivery.objects.filter(destination=d.destination_id, state=Delivery.State.PENDING,
                                   queued_at__isnull=False).exclude(pk=d.pk).exists()


def _wait_s(destination: Destination) -> float:
    """The group wait, or longer: the repeat interval since the destination's last notification."""
    last = (Delivery.objects.filter(destination=destination, sent_at__isnull=False)
            .order_by("-sent_at").values_list("sent_at", flat=True).first())
    since = (timezone.now() - last).total_seconds() if last else float("inf")
    return max(destination.group_wait_s, destination.repeat_interval_s - since, 0)


@shared_task(name="alerts.resend_unqueued")
def resend_unqueued(unsent_after_s: float | None = None) -> list[int]:
    """Beat job: queue the pending deliveries no broker took, once older than
    TRACEDOC_ALERT_UNSENT_AFTER_S (younger ones may still be on their way)."""
    age = settings.TRACEDOC_ALERT_UNSENT_AFTER_S if unsent_after_s is None else unsent_after_s
    ids = list(Delivery.objects.filter(state=Delivery.State.PENDING, queued_at__isnull=True,
                                       alert__created_at__lte=timezone.now() - timedelta(seconds=age))
               .order_by("pk").values_list("pk", flat=True)[:1000])
    return enqueue(ids)


@shared_task(name="alerts.check_agents")
def check_agents() -> list[int]:
    """Beat job: an alert per agent host gone stale, a notice per one back (alerts.agent_health)."""
    return enqueue([d.pk for d in agent_health.check()])


def backoff_s(retries: int) -> float:
    return min(MAX_BACKOFF_S, settings.TRACEDOC_ALERT_RETRY_BACKOFF_S * 2 ** retries)


@shared_task(name="alerts.deliver", bind=True, acks_late=True, max_retries=None)
def deliver(self, delivery_id: int) -> str:
    """Send one notification to the delivery's destination: this alert and those that joined
    its group; a failure is retried after 1, 2, 4, ... times the backoff until
    TRACEDOC_ALERT_MAX_ATTEMPTS attempts, then the group's deliveries are `failed`."""
    delivery = Delivery.objects.select_related("destination").filter(pk=delivery_id).first()
    if delivery is None:
        return "gone"
    with transaction.atomic():  # one group at a time per destination: two leaders never send one alert twice
        destination = Destination.objects.select_for_update().get(pk=delivery.destination_id)
        delivery.refresh_from_db()
        if delivery.state != Delivery.State.PENDING:
            return delivery.state  # a redelivered message of a finished delivery, or another leader took it
        group = [delivery, *Delivery.objects.filter(destination=destination, state=Delivery.State.PENDING,
                                                    queued_at__isnull=False).exclude(pk=delivery.pk)
                 .select_related("alert").order_by("pk")[:MAX_GROUP - 1]]
        messages = tuple(AlertMessage.from_dict(d.alert.payload) for d in group)
        try:
            status = SENDERS[destination.kind](destination, messages[0] if len(messages) == 1 else AlertDigest(messages))
        except DeliveryError as e:
            final = e.final or delivery.attempts + 1 >= settings.TRACEDOC_ALERT_MAX_ATTEMPTS
            error = redact(str(e), destination.url, destination.secret)  # senders' own texts too
            for d in group:  # the others stay queued behind this leader until its last try
                if d is delivery or final:
                    d.record(False, e.status, error, final=final)
            log.warning("alert delivery %s to %s failed (attempt %s, %d alert(s)): %s", delivery.pk, destination,
                        delivery.attempts, len(group), error)
            if final:
                return delivery.state
        else:
            for d in group:
                d.record(True, status)
            final = None
    if final is None:
        _lead_the_rest(destination)
        return delivery.state
    raise self.retry(countdown=backoff_s(self.request.retries))


def _lead_the_rest(destination: Destination) -> None:
    """Deliveries that joined while this group was being sent (or past MAX_GROUP) get a
    leader of their own, due after the repeat interval."""
    rest = (Delivery.objects.filter(destination=destination, state=Delivery.State.PENDING, queued_at__isnull=False)
            .order_by("pk").values_list("pk", flat=True).first())
    if rest is not None:
        _schedule(rest, _wait_s(destination))
