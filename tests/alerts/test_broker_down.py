"""An alert whose task the broker cannot take (Redis down) is not lost: it is evaluated
in-process, its delivery recorded as pending and unqueued, and the beat job queues it once
the broker answers again -- once. Real brokers: a port nothing listens on, then Redis."""
import pytest

from alerts.models import Alert, Delivery
from alerts.tasks import deliver, evaluate, resend_unqueued
from diagnosis.models import ClusterRecord
from tests.alerts.conftest import rule
from tests.support.cluster_world import NCCL, seen
from tests.support.fixtures import REDIS_URL, fresh_connections
from tracedoc.celery import app

pytestmark = pytest.mark.timeout(120)
DEAD_BROKER = "redis://127.0.0.1:9/0"


def point_celery_at(url: str) -> None:
    app.conf.update(CELERY_BROKER_URL=url)  # the Django-namespaced key, as the settings set it
    fresh_connections()


def test_an_alert_waits_out_a_dead_broker_and_is_sent_once(
        infra, destinations, receiver, no_worker, django_capture_on_commit_callbacks):
    rule(infra, "new", [destinations["slack"], destinations["webhook"]])
    point_celery_at(DEAD_BROKER)
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL, labels={"host": "gpu-a"})
    alert = Alert.objects.get()
    pending = list(Delivery.objects.filter(alert=alert).order_by("pk"))
    assert [(d.state, d.queued_at, d.attempts) for d in pending] == [("pending", None, 0)] * 2
    assert resend_unqueued(unsent_after_s=-1) == []  # still down: still waiting, still recorded
    assert Delivery.objects.filter(queued_at__isnull=True).count() == 2

    point_celery_at(REDIS_URL)  # the broker is back (no_worker's queue: the test plays the worker)
    assert resend_unqueued(unsent_after_s=3600) == []  # too young: its first send may be on its way
    ids = [d.pk for d in pending]
    assert resend_unqueued(unsent_after_s=-1) == ids
    assert no_worker.ids() == ids
    assert resend_unqueued(unsent_after_s=-1) == []  # queued once, not twice
    for pk in no_worker.ids():
        deliver(pk)
    assert set(Delivery.objects.values_list("state", flat=True)) == {"sent"}
    assert [r.path for r in receiver.requests] in (["/slack", "/hook"], ["/hook", "/slack"])
    assert receiver.on("/hook")[0].json["hosts"] == ["gpu-a"]


def test_with_the_broker_up_a_delivery_is_queued_at_once(
        infra, destinations, receiver, no_worker, django_capture_on_commit_callbacks):
    rule(infra, "new", [destinations["slack"]])
    with django_capture_on_commit_callbacks(execute=True):
        seen(infra, NCCL)
    # the evaluation task went to the broker; run it as the worker would
    [trace_id] = no_worker.ids()
    cluster = ClusterRecord.objects.get()
    [pk] = evaluate(trace_id, [{"cluster_id": cluster.pk, "kind": "new", "trace_id": trace_id, "key": "new"}])
    assert Delivery.objects.get(pk=pk).queued_at is not None
    assert no_worker.ids() == [trace_id, pk]  # the evaluation, then its delivery
    assert resend_unqueued(unsent_after_s=-1) == []
