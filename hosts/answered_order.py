"""Which capture request a trace answered, for the capture's own trace page: the order (the
closed loop's, with its cluster, rule, trigger and the trace whose finding asked, or a
person's on-demand request), what it changed, and the trace whose files it was diagnosed with.
"""
from __future__ import annotations

from dataclasses import dataclass

from hosts.models import CaptureRequest
from hosts.order_outcome import Outcome, outcome_of
from ingest.models import Trace


@dataclass(frozen=True)
class AnsweredOrder:
    order: CaptureRequest | None  # None: the trace adds to another with no request left on record
    adds_to: Trace | None         # the trace whose files its diagnosis read too (under before/)
    outcome: Outcome | None       # the closed loop's before -> after

    @property
    def by_loop(self) -> bool:
        return self.order is not None and self.order.origin == CaptureRequest.Origin.AUTO


def answered_order(trace: Trace) -> AnsweredOrder | None:
    """The request `trace` came back for (the latest, should two name it), or None for a trace
    nobody asked for. Only the trace's own team's records: the page is already the team's."""
    order = (CaptureRequest.objects.filter(trace=trace, team_id=trace.team_id)
             .select_related("host", "cluster", "source_trace", "created_by").order_by("-id").first())
    adds_to = trace.adds_to if trace.adds_to_id and trace.adds_to.team_id == trace.team_id else None
    if order is None and adds_to is None:
        return None
    outcome = outcome_of(order) if order is not None and order.origin == CaptureRequest.Origin.AUTO else None
    return AnsweredOrder(order, adds_to, outcome)
