"""Stored reports -> the closed loop (hosts.closed_loop): capture orders from findings that ask
for one, and the outcome of a capture that answered an order. Runs where the report was
stored (the diagnosis worker), after its transaction; a failure here is logged and never
undoes the stored report."""
from __future__ import annotations

import logging

from django.dispatch import receiver

from diagnosis.models import clusters_recorded
from hosts import closed_loop

log = logging.getLogger(__name__)


@receiver(clusters_recorded, dispatch_uid="hosts.closed_loop")
def close_the_loop(sender, trace, transitions, **kwargs) -> None:
    try:
        closed_loop.record_outcome(trace)
        closed_loop.order_captures(trace)
    except Exception:  # the report is stored either way: a missed order must not fail the diagnosis
        log.exception("closed loop: trace %s", trace.pk)
