"""The trace workflow: `ingest.parse_trace` then `diagnosis.diagnose_trace`, as one Celery
chain, and the beat job that keeps every trace moving.

The one module that knows both steps, so neither app imports the other's tasks. Each chain
is a *run* with an id kept on the trace (`Trace.run_id`); a task of a run that no longer owns
the trace (a message redelivered after the trace was queued again) leaves it alone, so a
trace is never worked on by two runs.

How a trace whose task was lost gets going again:
- the worker's pool child dies (SIGKILL, out of memory): the message is not acknowledged
  (`acks_late` + `reject_on_worker_lost`) and goes back to the queue at once;
- the whole worker dies: the broker redelivers the message after its visibility timeout;
- the broker loses its queue (a Redis restart without persistence, a flushed queue): the
  beat job `reconcile_traces` reads the broker's queues and sends a queued trace (received
  with a run, or parsed) whose run is on none of them, once it is RESEND_QUEUED_AFTER_S old,
  as a new run; a trace still on a queue (a backlog) is left in its place;
- anything else (a database write that failed): the beat job re-queues a trace in
  parsing/diagnosing whose heartbeat (`updated_at`) is older than a task may run, as a new
  run; after a bounded number of attempts the trace fails with a reason instead.

Several workers, several hosts: every take-over of a trace is a compare-and-set of its
`run_id` in PostgreSQL (`_new_run`), so a trace is re-queued once however many reconcilers
or workers look at it at the same time, and the tasks of the run that lost it do nothing. A
trace fanned out over several workers (ingest/fanout.py) keeps one run; its parts and merge
check it the same way.

Per-team parse slots (TRACEDOC_TEAM_MAX_PARSING): `ingest.parse_trace` leaves a trace whose
team has no slot free in `received` with no run; when one of the team's traces leaves
`parsing`, `_start_waiting` gives the oldest waiting one a run and queues it (and the beat
job's unsent pass would, after UNSENT_AFTER_S).
"""
from __future__ import annotations

import logging
import re
import uuid
from datetime import timedelta
from typing import NamedTuple

from celery import chain, shared_task
from django.conf import settings
from django.db import transaction
from django.dispatch import receiver
from django.utils import timezone

from diagnosis.tasks import MAX_DIAGNOSE_ATTEMPTS, diagnose_trace
from ingest.models import Trace
from ingest.parts import parse_finished
from ingest.signals import trace_received
from ingest.engine.io import env_int
from ingest.tasks import MAX_PARSE_ATTEMPTS, parse_trace

log = logging.getLogger(__name__)

# An upload whose task never reached the broker is sent again after this long.
UNSENT_AFTER_S = 120
# Beyond the task's hard time limit: the heartbeat of a live task is never older than that.
STALE_MARGIN_S = 60
# A trace queued (received with a run, or parsed and waiting for its diagnosis) this long whose
# message is on none of the broker's queues (a Redis restart without persistence, a flushed
# queue) is sent again as a new run (TRACEDOC_RESEND_QUEUED_AFTER_S).
RESEND_QUEUED_AFTER_S = 300
_RUN_ID = re.compile(rb"[0-9a-f]{32}")  # uuid4().hex; task and correlation ids have dashes


class Reconciled(NamedTuple):
    """What one pass of `reconcile_traces` did (trace ids)."""
    sent: list[int]       # uploads whose first message never reached the broker
    requeued: list[int]   # traces whose task was lost (running, or queued and lost with the broker), queued again
    failed: list[int]     # traces that lost their task too many times


@receiver(trace_received, sender=Trace, dispatch_uid="tracedoc.workflow.start_received")
def _start_received(sender, trace: Trace, **_) -> None:
    """An upload was stored (ingest.uploads.create_trace): its run starts."""
    start(trace)


def start(trace: Trace) -> None:
    """Parse then diagnose `trace` in a worker, once the current transaction is committed.

    With the broker down the upload still succeeds: the trace stays `received` with a note,
    and `reconcile_traces` sends it later."""
    run_id = _new_run(trace.pk)
    transaction.on_commit(lambda: _send(trace.pk, run_id, Trace.State.RECEIVED))


def _new_run(trace_id: int, current_run: str | None = None) -> str:
    """A new run id written on the trace; with `current_run`, only while that run still owns
    it (two reconcilers never both take over one trace). Empty when another run took it."""
    run_id = uuid.uuid4().hex
    rows = Trace.objects.filter(pk=trace_id)
    if current_run is not None:
        rows = rows.filter(run_id=current_run)
    return run_id if rows.update(run_id=run_id, updated_at=timezone.now()) else ""


def _send(trace_id: int, run_id: str, state: str) -> None:
    """Queue the steps a trace in `state` still has to go through."""
    if state in (Trace.State.PARSED, Trace.State.DIAGNOSING):
        steps = diagnose_trace.si(trace_id, run_id)
    else:
        steps = chain(parse_trace.si(trace_id, run_id), diagnose_trace.si(trace_id, run_id))
    try:
        steps.apply_async()
    except Exception as e:  # kombu OperationalError and friends: the broker is unreachable
        log.warning("trace %s: could not queue its tasks: %s", trace_id, e)
        Trace.objects.filter(pk=trace_id, run_id=run_id).update(
            run_id="", error=f"waiting for a worker: the task broker was unreachable ({type(e).__name__}); "
                             "it is queued again automatically")
        return
    Trace.objects.filter(pk=trace_id, run_id=run_id, state=Trace.State.RECEIVED).exclude(error="").update(error="")


@receiver(parse_finished, dispatch_uid="tracedoc.workflow.start_waiting")
def _start_waiting(sender, team_id: int, **_) -> None:
    """A parse slot of the team is free: the oldest of its traces waiting for one gets a run."""
    waiting = Trace.objects.filter(team_id=team_id, state=Trace.State.RECEIVED, run_id="") \
        .order_by("created_at", "id").values_list("pk", flat=True)
    for pk in waiting[:1]:
        run_id = _new_run(pk, current_run="")
        if run_id:
            _send(pk, run_id, Trace.State.RECEIVED)


def stale_after_s() -> int:
    """How long a trace in parsing/diagnosing may go without a heartbeat before its task
    counts as lost: no task runs longer than the hard time limit."""
    return int(settings.CELERY_TASK_TIME_LIMIT) + STALE_MARGIN_S


def runs_on_broker() -> set[str] | None:
    """The run ids of every task message the broker holds: waiting on a tracedoc queue or
    taken by a worker and not yet acknowledged. None when the broker cannot be read so (not
    Redis, or unreachable)."""
    from tracedoc.celery import app
    queues = {app.conf.task_default_queue, *getattr(settings, "TRACEDOC_QUEUES", {}).values()}
    try:
        with app.connection_for_read() as conn:
            if "redis" not in conn.transport.driver_type:
                return None
            client = conn.default_channel.client
            found: set[str] = set()
            for queue in queues:  # the queue and its priority lists (kombu's Redis layout)
                for key in (queue, *(f"{queue}\x06\x16{p}" for p in (3, 6, 9))):
                    for message in client.lrange(key, 0, -1):
                        found.update(m.decode() for m in _RUN_ID.findall(message))
            for message in client.hvals(conn.default_channel.unacked_key):
                found.update(m.decode() for m in _RUN_ID.findall(message))
            return found
    except Exception as e:  # the broker is down: the unsent pass takes over once it is back
        log.warning("reconcile: could not read the broker's queues: %s", e)
        return None


def _resend_lost(now, resend_after_s: float) -> list[int]:
    """Queued traces (received with a run, or parsed) untouched for `resend_after_s` whose run
    is on no queue of the broker: each gets a new run (a compare-and-set: sent once however
    many reconcilers look; a message of the old run found later does nothing)."""
    cutoff = now - timedelta(seconds=resend_after_s)
    waiting = Trace.objects.filter(state__in=(Trace.State.RECEIVED, Trace.State.PARSED),
                                   updated_at__lt=cutoff).exclude(run_id="")
    candidates = list(waiting.values_list("pk", "run_id", "state"))
    if not candidates:
        return []
    on_broker = runs_on_broker()
    if on_broker is None:
        return []
    resent = []
    for pk, old_run, state in candidates:
        if old_run in on_broker:
            continue  # still queued (a backlog): re-sending would put it at the back again
        # the compare-and-set also wants the trace unmoved: a worker may have taken the message
        # and moved on between the query and the read of the queues
        run_id = uuid.uuid4().hex
        if Trace.objects.filter(pk=pk, run_id=old_run, state=state, updated_at__lt=cutoff).update(
                run_id=run_id, updated_at=timezone.now()):
            log.warning("trace %s: %s, but its task is on no queue of the broker (lost with it); sent again",
                        pk, state)
            _send(pk, run_id, state)
            resent.append(pk)
    return resent


@shared_task(name="tracedoc.reconcile_traces")
def reconcile_traces(unsent_after_s: float = UNSENT_AFTER_S, stale_s: float | None = None,
                     resend_after_s: float | None = None) -> Reconciled:
    """Beat job: send the uploads that never reached the broker, and the queued traces whose
    message the broker lost; re-queue (or fail, after too many attempts) the traces whose task
    was lost while it ran."""
    now = timezone.now()
    if resend_after_s is None:
        resend_after_s = env_int("TRACEDOC_RESEND_QUEUED_AFTER_S", RESEND_QUEUED_AFTER_S)
    resent = _resend_lost(now, resend_after_s)
    sent = []
    unsent = Trace.objects.filter(state=Trace.State.RECEIVED, run_id="",
                                  created_at__lt=now - timedelta(seconds=unsent_after_s))
    for pk in unsent.values_list("pk", flat=True):
        run_id = _new_run(pk, current_run="")
        if run_id:
            _send(pk, run_id, Trace.State.RECEIVED)
            sent.append(pk)
    requeued, failed = [], []
    cutoff = now - timedelta(seconds=stale_after_s() if stale_s is None else stale_s)
    stuck = Trace.objects.filter(state__in=(Trace.State.PARSING, Trace.State.PARSED, Trace.State.DIAGNOSING),
                                 updated_at__lt=cutoff).exclude(pk__in=resent)
    for trace in stuck:
        if _gave_up(trace):
            failed.append(trace.pk)
            continue
        run_id = _new_run(trace.pk, current_run=trace.run_id)
        if run_id:
            log.warning("trace %s: %s with no heartbeat since %s; queued again", trace.pk, trace.state,
                        trace.updated_at)
            _send(trace.pk, run_id, trace.state)
            requeued.append(trace.pk)
    return Reconciled(sent, resent + requeued, failed)


def _gave_up(trace: Trace) -> bool:
    """Fail a trace whose task was lost at the same step too many times."""
    step, limit = ((Trace.State.PARSING, MAX_PARSE_ATTEMPTS) if trace.state == Trace.State.PARSING
                   else (Trace.State.DIAGNOSING, MAX_DIAGNOSE_ATTEMPTS))
    if trace.interrupted_attempts(step) < limit:
        return False
    # run_id emptied: no message of an earlier run may pick it up again
    trace.transition(Trace.State.FAILED, run_id="", error=(
        f"gave up after {limit} attempts: the worker stopped (killed, out of memory, or it lost the "
        f"database) each time while {step} this trace, and no task is working on it"))
    return True
