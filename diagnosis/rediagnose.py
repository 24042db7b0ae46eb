"""Re-diagnose a stored trace: the team's current rules and SLOs on the events parsed when it
was uploaded (no re-parse), in a worker, as a new workflow run (see tracedoc.workflow: a
message of an older run leaves the trace alone). The report, findings and clusters are
replaced; a cluster this trace already had is neither new nor regressed again."""
from __future__ import annotations

import logging
import uuid

from django.db import transaction

from diagnosis.tasks import diagnose_trace
from ingest.models import Trace

log = logging.getLogger(__name__)


class RediagnoseRefused(Exception):
    """The trace cannot be diagnosed again now; the message says why (HTTP 409)."""


class BrokerUnavailable(RediagnoseRefused):
    """The task could not be queued; the trace is left as it was (HTTP 503)."""


def rediagnose(trace: Trace) -> str:
    """Queue `diagnose_trace` for a finished trace whose files were parsed; the new run's id."""
    run_id = uuid.uuid4().hex
    with transaction.atomic():
        trace = Trace.objects.select_for_update().get(pk=trace.pk)
        if not trace.finished:
            raise RediagnoseRefused(f"the trace is {trace.state}: it can be diagnosed again once it is done")
        if not any(entry.get("state") == Trace.State.PARSED for entry in trace.state_history):
            raise RediagnoseRefused("the trace's files were never parsed: upload them again")
        before = {"state": trace.state, "error": trace.error}
        trace.transition(Trace.State.DIAGNOSING, run_id=run_id, error="")
    try:
        diagnose_trace.si(trace.pk, run_id).apply_async()
    except Exception as e:  # kombu OperationalError and friends: the broker is unreachable
        log.warning("trace %s: could not queue its re-diagnosis: %s", trace.pk, e)
        trace.transition(before["state"], run_id="", error=before["error"])
        raise BrokerUnavailable(f"the task broker is unreachable ({type(e).__name__}); try again later") from None
    return run_id
