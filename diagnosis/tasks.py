"""`diagnosis.diagnose_trace`: the parsed events of a trace -> report, findings, clusters.

Idempotent: the report and the trace's findings are replaced, cluster counts recomputed.
tracedoc.workflow sends it after `ingest.parse_trace` and re-queues a trace whose task was lost.
"""
from __future__ import annotations

import logging
import time

from celery import shared_task

from diagnosis.models import SLODefinition, record_report
from diagnosis.engine.pipeline import diagnose
from diagnosis.engine.results import Report
from ingest import db_outage
from ingest.engine.artifact_results import ArtifactResult
from ingest.models import Artifact, Trace
from ingest.storage import ContentStore
from ingest.task_failures import failures
from rules.engine.loader import load_rule_dirs
from rules.models import TeamRule

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 0.5
MAX_DIAGNOSE_ATTEMPTS = 3


@shared_task(name="diagnosis.diagnose_trace", acks_late=True, reject_on_worker_lost=True, **db_outage.RETRY)
def diagnose_trace(trace_id: int, run_id: str = "") -> None:
    """`run_id`: the workflow run that sent this message (tracedoc.workflow); a message of an
    older run, or one redelivered after its diagnosis was done, leaves the trace alone."""
    trace = Trace.objects.filter(pk=trace_id).select_related("team").first()
    if trace is None:
        return
    if not trace.runs_for(run_id, Trace.State.PARSED, Trace.State.DIAGNOSING):
        log.info("diagnose_trace %s: run %s no longer owns the trace (state %s, run %s); skipped",
                 trace_id, run_id, trace.state, trace.run_id)
        return
    if trace.interrupted_attempts(Trace.State.DIAGNOSING) >= MAX_DIAGNOSE_ATTEMPTS:
        trace.transition(Trace.State.FAILED, error=(
            f"gave up after {MAX_DIAGNOSE_ATTEMPTS} attempts: the worker stopped (killed, out of memory "
            "or crashed) each time while diagnosing this trace"))
        return
    trace.record_progress(stage="events", diagnosis_done=0.0)
    trace.transition(Trace.State.DIAGNOSING)
    with failures(lambda error: trace.transition(Trace.State.FAILED, error=error), log, f"diagnose_trace {trace.pk} failed",
                  doing="diagnosis", advice="a team rule may be too costly", internal="diagnosis failed",
                  out_of_memory="out of memory: diagnosing this trace needed more than the worker's "
                  "per-task memory limit (TRACEDOC_TASK_MEMORY_LIMIT_MB)") as outcome:
        report = diagnose_stored(trace, rules_for(trace.team), on_stage=_stage_recorder(trace))
    if outcome.failed:
        return
    record_report(trace, report)
    trace.record_progress(stage="done", diagnosis_done=1.0)
    trace.transition(Trace.State.DONE, report=report.to_dict())


def _stage_recorder(trace: Trace):
    """on_stage for the pipeline: each new stage is written at once (the page names it),
    progress within a stage (one rule after another) at most every PROGRESS_EVERY_S."""
    last = {"stage": None, "at": 0.0}

    def on_stage(stage: str, done: float) -> None:
        now = time.monotonic()
        if stage != last["stage"] or now - last["at"] >= PROGRESS_EVERY_S:
            last.update(stage=stage, at=now)
            trace.beat(stage=stage, diagnosis_done=round(done, 3))
    return on_stage


def rules_for(team) -> list:
    """The builtin pack, with the team's enabled rules added (a team rule with a builtin
    rule's id replaces it)."""
    merged = {r.id: r for r in load_rule_dirs(None)}
    merged.update((r.id, r) for r in TeamRule.objects.loaded_for(team))
    return list(merged.values())


def artifact_results(trace: Trace, store: ContentStore | None = None) -> list:
    """The trace's parsed artifacts as the pipeline knows them (archives are containers,
    their members are the artifacts)."""
    store = store or ContentStore()
    return [ArtifactResult(name=a.name, format=a.format, events=a.event_count, warnings=list(a.warnings),
                           error=a.error, parquet=a.parquet_path(store), meta=a.meta)
            for a in trace.artifacts.exclude(format__in=Artifact.CONTAINERS)]


EARLIER = "before/"  # where the files of the trace a capture adds to appear in its report


def earlier_trace(trace: Trace) -> Trace | None:
    """The trace a closed-loop capture adds to, when it is the same team's."""
    earlier = trace.adds_to
    return earlier if earlier is not None and earlier.team_id == trace.team_id else None


def stored_inputs(trace: Trace) -> tuple[list, dict]:
    """The files a stored trace is diagnosed with and their clock offsets: its own and, for a
    closed-loop capture, those of the trace whose finding asked for it (under before/). The
    timeline reads the same, so every file the report names has its lanes there."""
    artifacts, offsets = artifact_results(trace), dict(trace.clock_offsets or {})
    earlier = earlier_trace(trace)
    if earlier is not None:
        for a in artifact_results(earlier):
            a.name, a.rename = EARLIER + a.name, True
            artifacts.append(a)
        offsets.update({EARLIER + k: v for k, v in (earlier.clock_offsets or {}).items()})
    return artifacts, offsets


def missing_files(artifacts: list) -> list[str]:
    """The files of `artifacts` that were parsed but whose stored events are gone (deleted or
    unreachable): the pipeline would go on without them, so a trial says so instead."""
    return [a.name for a in artifacts if a.parquet is not None and not a.parquet.exists()]


def diagnose_stored(trace: Trace, rules: list, on_stage=None, on_events=None) -> Report:
    """The trace diagnosed from its stored inputs with `rules`: its diagnosis, the rules API's
    test and the rule editor's (diagnosis.rule_trial_runs, which reads the events: on_events)."""
    artifacts, offsets = stored_inputs(trace)
    return diagnose(artifacts, rules=rules, clock_offsets=offsets or None,
                    slos=SLODefinition.objects.effective_for(trace.team), on_stage=on_stage, on_events=on_events)
