"""Backtest a rule's text on one trace's events: the report under the rules as they were
(without any version of this rule) and under those rules with the edited text, and which
findings and clusters the text adds or removes; for a saved rule also what the edit changes
against the saved version: findings added, removed or changed (same firing, other numbers or
words) and each selection's matched rows, saved -> edited. Django-free: the caller loads the
events (diagnosis.engine.pipeline.load_events) and picks the traces (diagnosis.backtest_runs)."""
from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import pandas as pd

from diagnosis.engine.clusters import fingerprint
from diagnosis.engine.report import report_and_firings
from diagnosis.engine.results import Cluster, Report
from rules.engine.compiler import compile_rule
from rules.engine.errors import EvalError
from rules.engine.features import TraceContext
from rules.engine.results import Finding, RuleFinding
from rules.engine.selection_samples import selection_samples


@dataclass(frozen=True)
class FindingChange:
    rule_id: str
    rule_version: int
    title: str
    severity: str
    root_cause: str
    explanation: str
    start_ts: int

    def to_dict(self) -> dict:
        return {"rule_id": self.rule_id, "rule_version": self.rule_version, "title": self.title,
                "severity": self.severity, "root_cause": self.root_cause, "explanation": self.explanation,
                "start_ts": self.start_ts}


@dataclass(frozen=True)
class ClusterChange:
    fingerprint: str
    root_cause: str
    title: str
    severity: str

    def to_dict(self) -> dict:
        return {"fingerprint": self.fingerprint, "root_cause": self.root_cause, "title": self.title,
                "severity": self.severity}


@dataclass(frozen=True)
class FindingEdit:
    """One firing under both packs (same rule, fingerprint and window) that says other things:
    its metrics (a matched count), explanation or severity."""
    before: FindingChange
    after: FindingChange
    metrics: tuple[tuple[str, object, object], ...] = ()   # (name, before, after) of those that differ

    def to_dict(self) -> dict:
        return {"rule_id": self.after.rule_id, "title": self.after.title, "before": self.before.to_dict(),
                "after": self.after.to_dict(),
                "metrics": [{"name": n, "before": b, "after": a} for n, b, a in self.metrics]}


@dataclass(frozen=True)
class MatchCount:
    """Rows one selection of the rule matches on the trace: the saved version's (None: a new
    rule, or a selection the saved version lacks) and the edited text's (None: it dropped it)."""
    selection: str
    saved: int | None
    edited: int | None

    @property
    def changed(self) -> bool:
        return self.saved != self.edited

    def to_dict(self) -> dict:
        return {"selection": self.selection, "saved": self.saved, "edited": self.edited, "changed": self.changed}


@dataclass(frozen=True)
class ReportDelta:
    """What the candidate pack changes in one trace's report."""
    added_findings: tuple[FindingChange, ...] = ()
    removed_findings: tuple[FindingChange, ...] = ()
    added_clusters: tuple[ClusterChange, ...] = ()
    removed_clusters: tuple[ClusterChange, ...] = ()
    rule_errors: tuple[str, ...] = field(default=())
    changed_findings: tuple[FindingEdit, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.added_findings or self.removed_findings or self.added_clusters or self.removed_clusters
                    or self.changed_findings)

    def to_dict(self) -> dict:
        return {"added_findings": [f.to_dict() for f in self.added_findings],
                "removed_findings": [f.to_dict() for f in self.removed_findings],
                "changed_findings": [f.to_dict() for f in self.changed_findings],
                "added_clusters": [c.to_dict() for c in self.added_clusters],
                "removed_clusters": [c.to_dict() for c in self.removed_clusters],
                "rule_errors": list(self.rule_errors)}


@dataclass(frozen=True)
class TraceBacktest:
    """One trace: the edited text against the rules as they were (`delta`); for a saved rule,
    against its saved version (`vs_saved`) and each selection's matched rows (`matches`)."""
    delta: ReportDelta
    vs_saved: ReportDelta | None = None
    matches: tuple[MatchCount, ...] = ()
    match_error: str = ""

    @property
    def changed(self) -> bool:
        return self.delta.changed or bool(self.vs_saved and self.vs_saved.changed) or \
            any(m.changed for m in self.matches if m.saved is not None)

    def to_dict(self) -> dict:
        return {**self.delta.to_dict(), "vs_saved": self.vs_saved.to_dict() if self.vs_saved else None,
                "matches": [m.to_dict() for m in self.matches], "match_error": self.match_error}


Diagnosed = tuple[Report, list[RuleFinding]]  # diagnosis.engine.report.report_and_firings


def _firings(diagnosed: Diagnosed) -> tuple[RuleFinding, ...]:
    """The report's findings with the grouping values of the firings they come from."""
    report, firings = diagnosed
    return tuple(msgspec.structs.replace(firing, **msgspec.structs.asdict(f))
                 for f, firing in zip(report.findings, firings, strict=True))


def _finding_key(f: RuleFinding) -> tuple:
    # The same firing under both packs: same rule, same fingerprint, same window. A version
    # that only rewords the explanation changes neither side.
    return f.rule_id, fingerprint(f), f.start_ts or 0, f.end_ts or 0


def _finding_change(f: Finding) -> FindingChange:
    return FindingChange(rule_id=f.rule_id, rule_version=int(f.rule_version), title=f.title, severity=f.severity,
                         root_cause=f.root_cause, explanation=f.explanation, start_ts=int(f.start_ts or 0))


def _cluster_change(c: Cluster) -> ClusterChange:
    return ClusterChange(fingerprint=c.fingerprint, root_cause=c.root_cause, title=c.title, severity=c.severity)


def _pair(ours: tuple[Finding, ...], theirs: tuple[Finding, ...], key) -> tuple[list, list, list]:
    """(pairs, ours left, theirs left): findings matched one to one on `key`, in order."""
    left: dict[tuple, list[Finding]] = {}
    for f in theirs:
        left.setdefault(key(f), []).append(f)
    pairs, alone, taken = [], [], set()
    for f in ours:
        twins = left.get(key(f))
        if twins:
            pairs.append((twins.pop(0), f))
            taken.add(id(pairs[-1][0]))
        else:
            alone.append(f)
    return pairs, alone, [f for f in theirs if id(f) not in taken]


def _edit(old: Finding, new: Finding) -> FindingEdit | None:
    metrics = tuple((k, old.metrics.get(k), new.metrics.get(k)) for k in sorted({*old.metrics, *new.metrics}, key=str)
                    if old.metrics.get(k) != new.metrics.get(k))
    if metrics or old.explanation != new.explanation or old.severity != new.severity or \
            (old.start_ts, old.end_ts) != (new.start_ts, new.end_ts):
        return FindingEdit(_finding_change(old), _finding_change(new), metrics)
    return None


def compare_reports(diagnosed_before: Diagnosed, diagnosed_after: Diagnosed) -> ReportDelta:
    """Findings and clusters (by the fingerprint clusters are tracked by across traces) that
    `after` has and `before` lacks, and the reverse; and the firings both have that changed:
    the same rule and fingerprint with other metrics, words, severity or window (counted: two
    equal firings, one kept, one listed)."""
    (before, _), (after, _) = diagnosed_before, diagnosed_after
    same, added, removed = _pair(_firings(diagnosed_after), _firings(diagnosed_before), _finding_key)
    moved, added, removed = _pair(tuple(added), tuple(removed), lambda f: (f.rule_id, fingerprint(f)))
    edits = tuple(e for old, new in [*same, *moved] if (e := _edit(old, new)) is not None)
    before_clusters = {c.fingerprint: c for c in before.clusters}
    after_clusters = {c.fingerprint: c for c in after.clusters}
    new_errors = {(e.rule_id, e.error) for e in after.rule_errors} - {(e.rule_id, e.error) for e in before.rule_errors}
    return ReportDelta(
        added_findings=tuple(map(_finding_change, added)),
        removed_findings=tuple(map(_finding_change, removed)),
        added_clusters=tuple(_cluster_change(c) for fp, c in after_clusters.items() if fp not in before_clusters),
        removed_clusters=tuple(_cluster_change(c) for fp, c in before_clusters.items() if fp not in after_clusters),
        rule_errors=tuple(f"{rule_id}: {error}" for rule_id, error in sorted(new_errors)),
        changed_findings=edits)


def match_counts(events: pd.DataFrame, candidate, saved=None) -> tuple[MatchCount, ...]:
    """Rows each selection matches on these events: the saved version's and the edited text's."""
    ctx = TraceContext(events)
    edited = {s.name: s.count for s in selection_samples(compile_rule(candidate), ctx)}
    before = {s.name: s.count for s in selection_samples(compile_rule(saved), ctx)} if saved is not None else {}
    return tuple(MatchCount(name, before.get(name), edited.get(name)) for name in [*edited, *(
        n for n in before if n not in edited)])


def backtest_trace(artifacts: list, events: pd.DataFrame, baseline: list, candidate, saved=None,
                   slos=None) -> TraceBacktest:
    """One trace under the rules as they were (`baseline`: no version of the candidate's
    rule), with the edited text, and, for a saved rule, with its saved version."""
    def report(*extra) -> Diagnosed:
        return report_and_firings(artifacts, events, rules=with_candidate(baseline, *extra) if extra else baseline,
                                  slos=slos)
    before, after = report(), report(candidate)
    vs_saved = compare_reports(report(saved), after) if saved is not None else None
    try:
        matches, error = match_counts(events, candidate, saved), ""
    except EvalError as e:
        matches, error = (), str(e)
    return TraceBacktest(compare_reports(before, after), vs_saved, matches, error)


def with_candidate(pack: list, candidate) -> list:
    """The pack with `candidate` in place of the rule of its id (or added)."""
    return [r for r in pack if r.id != candidate.id] + [candidate]
