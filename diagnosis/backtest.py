"""Backtest a rule version on one trace's events: the report under the current rule pack and
under the pack with the candidate version, and which findings and clusters the candidate adds
or removes. Django-free: the caller loads the events (diagnosis.pipeline.load_events) and
picks the traces (diagnosis.backtest_runs)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from diagnosis.clusters import fingerprint
from diagnosis.report import build_report
from diagnosis.results import Cluster, Report
from rules.results import Finding


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
class ReportDelta:
    """What the candidate pack changes in one trace's report."""
    added_findings: tuple[FindingChange, ...] = ()
    removed_findings: tuple[FindingChange, ...] = ()
    added_clusters: tuple[ClusterChange, ...] = ()
    removed_clusters: tuple[ClusterChange, ...] = ()
    rule_errors: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return bool(self.added_findings or self.removed_findings or self.added_clusters or self.removed_clusters)

    def to_dict(self) -> dict:
        return {"added_findings": [f.to_dict() for f in self.added_findings],
                "removed_findings": [f.to_dict() for f in self.removed_findings],
                "added_clusters": [c.to_dict() for c in self.added_clusters],
                "removed_clusters": [c.to_dict() for c in self.removed_clusters],
                "rule_errors": list(self.rule_errors)}


def _finding_key(f: Finding) -> tuple:
    # The same firing under both packs: same rule, same fingerprint, same window. A version
    # that only rewords the explanation changes neither side.
    return f.rule_id, fingerprint(f), f.start_ts or 0, f.end_ts or 0


def _finding_change(f: Finding) -> FindingChange:
    return FindingChange(rule_id=f.rule_id, rule_version=int(f.rule_version), title=f.title, severity=f.severity,
                         root_cause=f.root_cause, explanation=f.explanation, start_ts=int(f.start_ts or 0))


def _cluster_change(c: Cluster) -> ClusterChange:
    return ClusterChange(fingerprint=c.fingerprint, root_cause=c.root_cause, title=c.title, severity=c.severity)


def _only_in(ours: tuple[Finding, ...], theirs: tuple[Finding, ...]) -> tuple[FindingChange, ...]:
    """Findings of `ours` without a match in `theirs`, counted (two equal firings, one kept: one listed)."""
    left = Counter(_finding_key(f) for f in theirs)
    extra = []
    for f in ours:
        key = _finding_key(f)
        if left[key]:
            left[key] -= 1
        else:
            extra.append(_finding_change(f))
    return tuple(extra)


def compare_reports(before: Report, after: Report) -> ReportDelta:
    """Findings and clusters (by the fingerprint clusters are tracked by across traces) that
    `after` has and `before` lacks, and the reverse."""
    before_clusters = {c.fingerprint: c for c in before.clusters}
    after_clusters = {c.fingerprint: c for c in after.clusters}
    new_errors = {(e.rule_id, e.error) for e in after.rule_errors} - {(e.rule_id, e.error) for e in before.rule_errors}
    return ReportDelta(
        added_findings=_only_in(after.findings, before.findings),
        removed_findings=_only_in(before.findings, after.findings),
        added_clusters=tuple(_cluster_change(c) for fp, c in after_clusters.items() if fp not in before_clusters),
        removed_clusters=tuple(_cluster_change(c) for fp, c in before_clusters.items() if fp not in after_clusters),
        rule_errors=tuple(f"{rule_id}: {error}" for rule_id, error in sorted(new_errors)))


def backtest_events(artifacts: list, events: pd.DataFrame, current_rules: list, candidate_rules: list,
                    slos=None) -> ReportDelta:
    """One trace's events diagnosed under both packs (the events are loaded once)."""
    before = build_report(artifacts, events, rules=current_rules, slos=slos)
    after = build_report(artifacts, events, rules=candidate_rules, slos=slos)
    return compare_reports(before, after)


def with_candidate(pack: list, candidate) -> list:
    """The pack with `candidate` in place of the rule of its id (or added)."""
    return [r for r in pack if r.id != candidate.id] + [candidate]
