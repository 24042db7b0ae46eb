"""Stored reports -> alert evaluation in a worker, once the report's transaction is committed
and only for a team with enabled alert rules. With the broker down the evaluation runs here
instead, and its deliveries wait, recorded, for the beat job (alerts.tasks.resend_unqueued)."""
from __future__ import annotations

import logging
from dataclasses import asdict

from django.db import transaction
from django.dispatch import receiver

from alerts.evaluate import fire
from alerts.models import AlertRule
from alerts.tasks import enqueue, evaluate
from diagnosis.models import ClusterTransition, clusters_recorded
from ingest.models import Trace

log = logging.getLogger(__name__)


@receiver(clusters_recorded, dispatch_uid="alerts.queue_evaluation")
def queue_evaluation(sender, trace, transitions, **kwargs) -> None:
    if not transitions or not AlertRule.objects.filter(team_id=trace.team_id, enabled=True).exists():
        return
    payload = [asdict(t) for t in transitions]
    transaction.on_commit(lambda: _send(trace.pk, payload))


def _send(trace_id: int, payload: list[dict]) -> None:
    try:
        evaluate.delay(trace_id, payload)
    except Exception as e:  # the broker is unreachable: evaluate here, so the alerts are recorded
        log.warning("trace %s: alert evaluation not queued (%s); evaluated in-process", trace_id, e)
        trace = Trace.objects.filter(pk=trace_id).select_related("team").first()
        if trace is not None:
            enqueue([d.pk for d in fire(trace, [ClusterTransition(**t) for t in payload])])
