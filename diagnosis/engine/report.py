"""Build the report (docs/api.md, the `Report` schema component) from parsed artifacts and their events."""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from msgspec import UNSET, UnsetType

from diagnosis.engine import clusters as clustering
from diagnosis.engine.breakdowns import breakdowns
from diagnosis.engine.results import ArtifactEntry, Report, TraceSummary, rule_failures
from diagnosis.engine.series import plot_series
from diagnosis.engine.slo import evaluate_slos
from diagnosis.engine.trace_figures import headline_slis
from ingest.engine.events import INT64_MAX, INT64_MIN
from ingest.engine.progress import DIAGNOSIS_STAGES as STAGES
from ingest.engine.trace_frame import distinct_text
from rules.engine.capture_plans import CapturePlan
from rules.engine.compiler import compile_pack
from rules.engine.evaluator import evaluate_rules, precompute_features
from rules.engine.features import TraceContext
from rules.engine.features.jobs import job_folders
from rules.engine.loader import load_rule_dirs
from rules.engine.results import RuleFinding
from rules.engine.severity import RANK

MAX_HOSTS = 200


def _no_stage(stage: str, done: float) -> None:
    pass


def evaluate(events: pd.DataFrame, rules, on_stage=None) -> tuple[list[RuleFinding], list[dict], TraceContext]:
    """Run the rules over the events; returns (findings, rule errors, trace context).
    `on_stage(stage, done)` hears the features stage, then each rule's share of the rules stage."""
    stage = on_stage or _no_stage
    ctx = TraceContext(events)
    compiled = compile_pack(rules)  # one bad rule never stops the others
    errors = [{"rule_id": rule_id, "error": message} for rule_id, message in compiled.errors]
    stage("features", STAGES["features"])
    precompute_features(compiled, ctx)
    lo, hi = STAGES["rules"], STAGES["clusters"]

    def on_rule(done: int, total: int) -> None:
        stage("rules", lo + (hi - lo) * done / total)
    findings, eval_errors = evaluate_rules(compiled, ctx, on_rule=on_rule if on_stage else None)
    return findings, errors + list(eval_errors), ctx


def build_report(artifacts, events: pd.DataFrame, rules=None, alignment: list[dict] | None = None,
                 slos=None, on_stage=None, warnings: Sequence[str] = (),
                 extents: Mapping[str, tuple[int, int]] | None = None) -> Report:
    """`rules` None: the builtin pack (the one place that default is taken). `extents`: each
    artifact's (first, last) time on the common clock, by artifact name."""
    return report_and_firings(artifacts, events, rules, alignment, slos, on_stage, warnings, extents)[0]


def report_and_firings(artifacts, events: pd.DataFrame, rules=None, alignment: list[dict] | None = None,
                       slos=None, on_stage=None, warnings: Sequence[str] = (),
                       extents: Mapping[str, tuple[int, int]] | None = None) -> tuple[Report, list[RuleFinding]]:
    """`build_report`'s report and, in the order of its findings, the engine's findings it lists:
    with their grouping values, which the report leaves out (a backtest pairs firings by them)."""
    if rules is None:
        rules = load_rule_dirs(None)
    stage = on_stage or _no_stage
    findings, rule_errors, ctx = evaluate(events, rules, on_stage)
    stage("clusters", STAGES["clusters"])
    findings, suppressed = clustering.apply_suppressions(findings)
    findings.sort(key=lambda f: (f.start_ts or 0, -RANK.get(f.severity, 0)))
    finding_ids = [f"F{i}" for i in range(1, len(findings) + 1)]
    groups, consequence_of = clustering.cluster_findings(findings, job_folders(events))
    clusters = clustering.describe(groups, findings, finding_ids)
    cluster_of = {fid: c.id for c in clusters for fid in c.findings}
    formats = {a.format for a in artifacts}
    reported = [f.reported(
        id=fid, cluster=cluster_of.get(fid), slo=f.slo or None, end_ts=f.end_ts or f.start_ts or 0,
        consequence_of=finding_ids[consequence_of[i]] if i in consequence_of else None,
        capture=_open_question(f, i in consequence_of, formats))
        for i, (fid, f) in enumerate(zip(finding_ids, findings))]
    stage("SLOs", STAGES["SLOs"])
    violations = evaluate_slos(ctx, reported, slos)
    alignment = list(alignment or ())
    clock_warnings = {a["artifact"]: a["warning"] for a in alignment if a.get("warning")}
    span = _aligned_span(extents, alignment) or _time_span(events)
    trace = TraceSummary(
        artifacts=tuple(_artifact_entry(a, extents or {}, clock_warnings.get(a.name)) for a in artifacts),
        events=int(len(events)), start_ts=span[0], end_ts=span[1],
        alignment=tuple(alignment), series=plot_series(ctx), hosts=tuple(_hosts(events)),
        warnings=tuple(warnings or ()) + tuple(clock_warnings.values())
        + tuple(a.duplicate.warning() for a in artifacts if a.duplicate))
    report = Report(trace=trace, findings=tuple(reported), violations=tuple(violations), clusters=tuple(clusters),
                    rule_errors=rule_failures(rule_errors), suppressed=tuple(suppressed),
                    breakdowns=breakdowns(events).to_dict(), slis=headline_slis(ctx))
    return report, findings


def _artifact_entry(a, extents: Mapping[str, tuple[int, int]], clock_warning: str | None = None) -> ArtifactEntry:
    """A parsed artifact (ingest's ArtifactResult) as the report lists it."""
    start, end = extents.get(a.name, (None, None))
    return ArtifactEntry(path=a.name, format=a.format or "unknown", events=a.events,
                         warnings=tuple(a.all_warnings()) + ((clock_warning,) if clock_warning else ()),
                         internal_error=a.internal_error, start_ts=start, end_ts=end)


def _hosts(events: pd.DataFrame) -> Iterable[str]:
    """Hosts the events name (log prefixes, NVML samples, OTLP resources)."""
    if events.empty:
        return []
    hosts = distinct_text(events["host"])  # per distinct host, not per row
    return sorted(h for h in hosts if h and h not in ("-1", "nan"))[:MAX_HOSTS]


def _open_question(f: RuleFinding, explained: bool, formats: set[str]) -> CapturePlan | UnsetType:
    """A finding's capture plan, unless another finding already explains it or the trace
    already holds the evidence the plan would capture."""
    plan = f.capture
    if isinstance(plan, UnsetType) or explained or formats.intersection(plan.unless):
        return UNSET
    return plan


def _aligned_span(extents: Mapping[str, tuple[int, int]] | None,
                  alignment: list[dict]) -> tuple[int, int] | None:
    """The trace's span over the artifacts placed on the common clock: one left on its own
    clock (a perf capture without an offset, a log no evidence could date) would stretch it
    over whatever its clock counts from."""
    if not extents or not alignment:
        return None
    placed = [extents[a["artifact"]] for a in alignment if a.get("aligned") and a["artifact"] in extents]
    if not placed:
        return None
    return min(lo for lo, _ in placed), max(hi for _, hi in placed)


def _time_span(events: pd.DataFrame) -> tuple[int | None, int | None]:
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    timed = ts > 0
    if not timed.any():
        return None, None
    # masked reductions: no row-sized copies of the timed rows (each page faulted in)
    return (int(ts.min(where=timed, initial=INT64_MAX)), int(np.add(ts, dur).max(where=timed, initial=INT64_MIN)))
