"""`diagnosis.diagnose_trace`: the parsed events of a trace -> report, findings, clusters.

Idempotent: the report and the trace's findings are replaced, cluster counts recomputed.
"""
from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from diagnosis.models import record_report
from ingest.models import Artifact, Trace
from ingest.storage import ContentStore

log = logging.getLogger(__name__)
PROGRESS_EVERY_S = 0.5


@shared_task(name="diagnosis.diagnose_trace", acks_late=True)
def diagnose_trace(trace_id: int) -> None:
    trace = Trace.objects.filter(pk=trace_id).select_related("team").first()
    if trace is None:
        return
    trace.record_progress(stage="events", diagnosis_done=0.0)
    trace.transition(Trace.State.DIAGNOSING)
    try:
        report = diagnose_stored(trace, rules_for(trace.team), on_stage=_stage_recorder(trace))
    except SoftTimeLimitExceeded:
        trace.transition(Trace.State.FAILED, error="diagnosis took longer than the worker's time limit "
                         "(TRACEDOC_TASK_SOFT_TIME_LIMIT); a team rule may be too costly")
        return
    except Exception as e:
        log.exception("diagnose_trace %s failed", trace.pk)
        trace.transition(Trace.State.FAILED, error=f"diagnosis failed ({type(e).__name__}: {e}); "
                         "the worker log has the details")
        return
    record_report(trace, report)
    trace.record_progress(stage="done", diagnosis_done=1.0)
    trace.transition(Trace.State.DONE, report=report)


def _stage_recorder(trace: Trace):
    """on_stage for the pipeline: each new stage is written at once (the page names it),
    progress within a stage (one rule after another) at most every PROGRESS_EVERY_S."""
    last = {"stage": None, "at": 0.0}

    def on_stage(stage: str, done: float) -> None:
        now = time.monotonic()
        if stage != last["stage"] or now - last["at"] >= PROGRESS_EVERY_S:
            last.update(stage=stage, at=now)
            trace.record_progress(stage=stage, diagnosis_done=round(done, 3))
    return on_stage


def rules_for(team) -> list:
    """The builtin pack, with the team's enabled rules added (a team rule with a builtin
    rule's id replaces it)."""
    from rules.loader import load_rule_dirs
    from rules.models import Rule
    merged = {r.id: r for r in load_rule_dirs(None)}
    merged.update((r.id, r) for r in Rule.objects.loaded_for(team))
    return list(merged.values())


def artifact_results(trace: Trace, store: ContentStore | None = None) -> list:
    """The trace's parsed artifacts as the pipeline knows them (archives are containers,
    their members are the artifacts)."""
    from diagnosis.pipeline import ArtifactResult
    store = store or ContentStore()
    return [ArtifactResult(name=a.name, format=a.format, events=a.event_count, warnings=list(a.warnings),
                           error=a.error, parquet=a.parquet_path(store), meta=a.meta)
            for a in trace.artifacts.exclude(format__in=Artifact.CONTAINERS)]


def diagnose_stored(trace: Trace, rules: list, on_stage=None) -> dict:
    from diagnosis.pipeline import diagnose
    from diagnosis.models import SLODefinition
    return diagnose(artifact_results(trace), rules=rules, clock_offsets=trace.clock_offsets or None,
                    slos=SLODefinition.objects.effective_for(trace.team), on_stage=on_stage)
