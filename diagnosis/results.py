"""The report of one diagnosis as immutable values, and its one JSON form.

The engine builds a `Report` (findings from rules.results, clusters, SLO violations); the
CLI's renderers, the web pages and the Django models read these objects. `Report.to_dict()`
is the JSON report (docs/api.md; the `Report` component of the OpenAPI schema), `Report.from_dict()` reads one back (a stored
report, a server's answer): the only two places that know its keys.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from rules.capture_plans import CapturePlan
from rules.results import Evidence, Finding
from rules.severity import RANK

REPORT_VERSION = 1


@dataclass(frozen=True)
class Cluster:
    """Findings of one root cause within a trace; `headline` and `findings` are finding ids."""
    id: str
    fingerprint: str
    root_cause: str
    title: str
    severity: str
    headline: str
    findings: tuple[str, ...]
    slos: tuple[str, ...]
    why_grouped: str
    start_ts: int
    # fingerprints of earlier grouping versions / root-cause names (diagnosis.clusters.GROUPING_VERSION)
    earlier_fingerprints: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = {"fingerprint": self.fingerprint, "root_cause": self.root_cause, "title": self.title,
             "severity": self.severity, "headline": self.headline, "findings": list(self.findings),
             "slos": list(self.slos), "why_grouped": self.why_grouped, "start_ts": self.start_ts,
             "id": self.id}
        if self.earlier_fingerprints:  # only while a grouping change is carried (reports stay as they were)
            d["earlier_fingerprints"] = list(self.earlier_fingerprints)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Cluster":
        return cls(id=d["id"], fingerprint=d["fingerprint"], root_cause=d.get("root_cause") or "",
                   title=d["title"], severity=d["severity"], headline=d["headline"],
                   findings=tuple(d.get("findings") or ()), slos=tuple(d.get("slos") or ()),
                   why_grouped=d.get("why_grouped") or "", start_ts=int(d.get("start_ts") or 0),
                   earlier_fingerprints=tuple(d.get("earlier_fingerprints") or ()))


@dataclass(frozen=True)
class Violation:
    """An SLO broken in its worst window, with the findings that explain it (ids)."""
    slo: str
    title: str
    sli: str
    objective: str
    window: tuple[int, int]
    observed: float
    observed_text: str
    burn_rate: float
    samples: int
    findings: tuple[str, ...] = ()
    error = None  # the template and the renderers tell a violation from a failed SLO by this

    def to_dict(self) -> dict:
        return {"slo": self.slo, "title": self.title, "sli": self.sli, "objective": self.objective,
                "window": list(self.window), "observed": self.observed, "observed_text": self.observed_text,
                "burn_rate": self.burn_rate, "samples": self.samples, "findings": list(self.findings)}


@dataclass(frozen=True)
class FailedSLO:
    """An SLO whose SLI could not be computed on this trace."""
    slo: str
    error: str

    def to_dict(self) -> dict:
        return {"slo": self.slo, "error": self.error}


def _slo_outcome_from_dict(d: Mapping[str, Any]) -> Violation | FailedSLO:
    if "error" in d:
        return FailedSLO(slo=d["slo"], error=d["error"])
    return Violation(slo=d["slo"], title=d.get("title") or "", sli=d.get("sli") or "",
                     objective=d.get("objective") or "", window=tuple(d["window"]), observed=d["observed"],
                     observed_text=d.get("observed_text") or "", burn_rate=d["burn_rate"],
                     samples=int(d.get("samples") or 0), findings=tuple(d.get("findings") or ()))


@dataclass(frozen=True)
class RuleFailure:
    """A rule that could not compile or run on this trace (the others went on)."""
    rule_id: str
    error: str

    def to_dict(self) -> dict:
        return {"rule_id": self.rule_id, "error": self.error}


@dataclass(frozen=True)
class Suppression:
    """A finding left out because another finding's rule `suppresses` its root cause."""
    rule_id: str
    root_cause: str
    by: str

    def to_dict(self) -> dict:
        return {"rule_id": self.rule_id, "root_cause": self.root_cause, "by": self.by}


@dataclass(frozen=True)
class ArtifactEntry:
    """One input file as the report lists it; start/end on the trace's common clock."""
    path: str
    format: str
    events: int
    warnings: tuple[str, ...] = ()
    internal_error: bool = False   # the file's error is a tracedoc bug (the CLI exits 3)
    start_ts: int | None = None
    end_ts: int | None = None

    def to_dict(self) -> dict:
        entry = {"path": self.path, "format": self.format, "events": self.events, "warnings": list(self.warnings)}
        if self.internal_error:
            entry["internal_error"] = True
        entry["start_ts"], entry["end_ts"] = self.start_ts, self.end_ts
        return entry

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ArtifactEntry":
        return cls(path=d["path"], format=d.get("format") or "unknown", events=int(d.get("events") or 0),
                   warnings=tuple(d.get("warnings") or ()), internal_error=bool(d.get("internal_error")),
                   start_ts=d.get("start_ts"), end_ts=d.get("end_ts"))


@dataclass(frozen=True)
class TraceSummary:
    """What the diagnosis read: files, events, time span, clock alignment, plot series."""
    artifacts: tuple[ArtifactEntry, ...]
    events: int
    start_ts: int | None
    end_ts: int | None
    alignment: tuple[Mapping[str, Any], ...] = ()   # ingest.align's description, shown as is
    series: Mapping[str, Any] = field(default_factory=dict)  # the UI's plots (diagnosis.series)
    hosts: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"artifacts": [a.to_dict() for a in self.artifacts], "events": self.events,
                "start_ts": self.start_ts, "end_ts": self.end_ts, "alignment": list(self.alignment),
                "series": dict(self.series), "hosts": list(self.hosts), "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TraceSummary":
        return cls(artifacts=tuple(ArtifactEntry.from_dict(a) for a in d.get("artifacts") or ()),
                   events=int(d.get("events") or 0), start_ts=d.get("start_ts"), end_ts=d.get("end_ts"),
                   alignment=tuple(d.get("alignment") or ()), series=d.get("series") or {},
                   hosts=tuple(d.get("hosts") or ()), warnings=tuple(d.get("warnings") or ()))


@dataclass(frozen=True)
class Summary:
    findings_by_severity: Mapping[str, int]
    worst: str | None
    violations: int

    def to_dict(self) -> dict:
        return {"findings_by_severity": dict(self.findings_by_severity), "worst": self.worst,
                "violations": self.violations}


@dataclass(frozen=True)
class Report:
    """One trace's diagnosis. Findings carry their report ids ("F1"...), time-ordered."""
    trace: TraceSummary
    findings: tuple[Finding, ...] = ()
    violations: tuple[Violation | FailedSLO, ...] = ()
    clusters: tuple[Cluster, ...] = ()
    rule_errors: tuple[RuleFailure, ...] = ()
    suppressed: tuple[Suppression, ...] = ()
    # HTA-style figures (diagnosis.breakdowns.Breakdowns.to_dict()): shown, never judged
    breakdowns: Mapping[str, Any] = field(default_factory=dict)
    # headline figures of the trace (diagnosis.trace_figures.headline_slis): time to first token
    # and GPU busy, None where the trace cannot give them; stored so diffs and /metrics need no events
    slis: Mapping[str, float | None] = field(default_factory=dict)
    version: int = REPORT_VERSION

    @property
    def summary(self) -> Summary:
        counts = {s: 0 for s in RANK}
        for f in self.findings:
            counts[f.severity] = counts.get(f.severity, 0) + 1
        worst = max((f.severity for f in self.findings), key=lambda s: RANK.get(s, -1), default=None)
        return Summary(findings_by_severity=counts, worst=worst, violations=len(self.violations))

    def finding(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    def to_dict(self) -> dict:
        return {
            "version": self.version,
            "trace": self.trace.to_dict(),
            "findings": [finding_to_dict(f) for f in self.findings],
            "violations": [v.to_dict() for v in self.violations],
            "clusters": [c.to_dict() for c in self.clusters],
            "rule_errors": [e.to_dict() for e in self.rule_errors],
            "suppressed": [s.to_dict() for s in self.suppressed],
            "summary": self.summary.to_dict(),
            "breakdowns": dict(self.breakdowns),
            "slis": json_values(dict(self.slis)),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Report":
        """A JSON report read back (a stored one, a server's answer)."""
        return cls(trace=TraceSummary.from_dict(d.get("trace") or {}),
                   findings=tuple(finding_from_dict(f) for f in d.get("findings") or ()),
                   violations=tuple(_slo_outcome_from_dict(v) for v in d.get("violations") or ()),
                   clusters=tuple(Cluster.from_dict(c) for c in d.get("clusters") or ()),
                   rule_errors=tuple(RuleFailure(e["rule_id"], e["error"]) for e in d.get("rule_errors") or ()),
                   suppressed=tuple(Suppression(s["rule_id"], s.get("root_cause") or "", s["by"])
                                    for s in d.get("suppressed") or ()),
                   breakdowns=dict(d.get("breakdowns") or {}), slis=dict(d.get("slis") or {}),
                   version=int(d.get("version") or REPORT_VERSION))


def finding_to_dict(f: Finding) -> dict:
    """A finding as the JSON report lists it (the engine's group/fingerprint/causes stay out)."""
    return {
        "id": f.id, "rule_id": f.rule_id, "rule_version": f.rule_version, "title": f.title,
        "severity": f.severity, "root_cause": f.root_cause, "slo": f.slo, "cluster": f.cluster,
        "start_ts": f.start_ts, "end_ts": f.end_ts, "explanation": f.explanation,
        "recommendations": list(f.recommendations), "references": list(f.references),
        "evidence": [e.to_dict() for e in f.evidence], "metrics": json_values(f.metrics),
        "consequence_of": f.consequence_of,
        **({"capture": {**f.capture.to_dict(), "summary": f.capture.summary()}} if f.capture else {}),
    }


def finding_from_dict(d: Mapping[str, Any]) -> Finding:
    return Finding(
        id=str(d.get("id") or ""), rule_id=d["rule_id"], rule_version=d.get("rule_version", 1), title=d["title"],
        severity=d["severity"], root_cause=d.get("root_cause") or "", slo=d.get("slo") or None,
        cluster=d.get("cluster"), start_ts=int(d.get("start_ts") or 0), end_ts=int(d.get("end_ts") or 0),
        explanation=d.get("explanation") or "", recommendations=tuple(d.get("recommendations") or ()),
        references=tuple(d.get("references") or ()),
        evidence=tuple(Evidence.from_dict(e) for e in d.get("evidence") or ()),
        metrics=d.get("metrics") or {}, consequence_of=d.get("consequence_of") or None,
        capture=CapturePlan.from_dict(d["capture"]) if d.get("capture") else None)


def json_values(value: Any) -> Any:
    """numpy scalars and friends -> plain JSON types (NaN -> null, tuples -> lists)."""
    if isinstance(value, Mapping):
        return {str(k): json_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_values(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float) and value != value:
        return None
    return value


def rule_failures(errors: Sequence[Mapping[str, str]]) -> tuple[RuleFailure, ...]:
    """The rule engine's {rule_id, error} entries as typed values."""
    return tuple(RuleFailure(rule_id=e["rule_id"], error=e["error"]) for e in errors)
