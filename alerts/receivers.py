"""Stored reports -> alert evaluation in a worker, once the report's transaction is committed
and only for a team with enabled alert rules."""
from __future__ import annotations

import logging
from dataclasses import asdict

from django.db import transaction
from django.dispatch import receiver

from alerts.models import AlertRule
from alerts.tasks import evaluate
from diagnosis.models import clusters_recorded

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
    except Exception as e:  # the broker is unreachable: the diagnosis stands, the alert is lost
        log.error("trace %s: could not queue its alert evaluation: %s", trace_id, e)
