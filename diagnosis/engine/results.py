"""The report of one diagnosis as immutable msgspec Structs: the one definition of its JSON.

The engine builds a `Report` (findings from rules.engine.results, clusters, SLO violations); the
CLI's renderers, the web pages and the Django models read these objects. Each Struct's fields,
in order, are the JSON report's keys (docs/api.md): `Report.to_json()` / `to_dict()` write it,
`Report.from_dict()` reads one back (a stored report, a server's answer), and the OpenAPI
`Report` component is generated from the same classes (`report_schema_components`).

Keys written only sometimes are `UNSET` while absent (`ArtifactEntry.internal_error`,
`Finding.capture`) or omitted at their default (`Cluster.earlier_fingerprints`). Reading back
tolerates reports stored before a key existed: a missing (or null, where the report never
writes null) key takes its default.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Mapping, Sequence

import msgspec
from msgspec import UNSET, Meta, UnsetType

from rules.engine.capture_plans import CapturePlan
from rules.engine.results import Finding, Severity
from rules.engine.severity import RANK

REPORT_VERSION = 1


class Cluster(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Findings of one root cause within a trace; `headline` and `findings` are finding ids.
    Every key but `earlier_fingerprints` is written by every version of the report."""
    fingerprint: Annotated[str, Meta(description="stable across traces: the same root cause, the same value")]
    root_cause: str
    title: str
    severity: Severity
    headline: Annotated[str, Meta(description="the finding id that names the cluster")]
    findings: tuple[str, ...]
    slos: tuple[str, ...]
    why_grouped: str
    start_ts: int
    id: Annotated[str, Meta(description="C1, C2...")]
    # fingerprints of earlier grouping versions / root-cause names (diagnosis.engine.clusters.GROUPING_VERSION),
    # only while a grouping change is carried (reports stay as they were)
    earlier_fingerprints: Annotated[tuple[str, ...], Meta(
        description="only while a grouping change is carried: the fingerprints this cluster had before (a "
                    "renamed root cause or an earlier grouping version); the team's cluster of any of them "
                    "takes `fingerprint`")] = ()


class SLOOutcome:
    """A violated SLO (`Violation`) or one that could not be evaluated (`FailedSLO`). The JSON
    tells them apart by `error` alone (no tag), so reading one picks the type by that key."""
    __slots__ = ()


class Violation(msgspec.Struct, SLOOutcome, frozen=True, kw_only=True):
    """An SLO broken in its worst window, with the findings that explain it (ids)."""
    slo: str
    title: str = ""
    sli: str = ""
    objective: str = ""
    window: Annotated[tuple[int, int], Meta(description="[start_ns, end_ns] of the worst window")]
    observed: float
    observed_text: str = ""
    burn_rate: float
    samples: int = 0
    findings: tuple[str, ...] = ()
    error = None  # not a field: the template and the renderers tell a violation from a failed SLO by this


class FailedSLO(msgspec.Struct, SLOOutcome, frozen=True, kw_only=True):
    """An SLO whose SLI could not be computed on this trace."""
    slo: str
    error: Annotated[str, Meta(description="why the SLI could not be computed")]


if TYPE_CHECKING:  # what a reader gets; msgspec reads the marker class (`_decode_hook` picks the type)
    Outcome = Violation | FailedSLO
else:
    Outcome = SLOOutcome


class RuleFailure(msgspec.Struct, frozen=True, kw_only=True):
    """A rule that could not compile or run on this trace (the others went on)."""
    rule_id: str
    error: str


class Suppression(msgspec.Struct, frozen=True, kw_only=True):
    """A finding left out because another finding's rule `suppresses` its root cause."""
    rule_id: str
    root_cause: str = ""
    by: str


class ArtifactEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One input file as the report lists it; start/end on the trace's common clock.
    `internal_error`: the file's error is a tracedoc bug (the CLI exits 3); written only then."""
    path: str
    format: Annotated[str, Meta(description="the parser that read it; 'unknown' when none could")] = "unknown"
    events: int = 0
    warnings: tuple[str, ...] = ()
    internal_error: bool | UnsetType = UNSET
    start_ts: int | None = None
    end_ts: int | None = None

    def __post_init__(self) -> None:
        if self.internal_error is False:
            msgspec.structs.force_setattr(self, "internal_error", UNSET)


class TraceSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What the diagnosis read: files, events, time span, clock alignment, plot series."""
    artifacts: tuple[ArtifactEntry, ...] = ()
    events: int = 0
    start_ts: int | None = None
    end_ts: int | None = None
    # ingest.engine.align's description, shown as is
    alignment: Annotated[tuple[Mapping[str, Any], ...], Meta(description="how each file's clock was aligned")] = ()
    # the UI's plots (diagnosis.engine.series)
    series: Annotated[Mapping[str, Any], Meta(description="plot series: step_latency_ms, gpu_telemetry")] = \
        msgspec.field(default_factory=dict)
    hosts: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    """Findings counted by severity, the worst, and the number of SLO outcomes."""
    findings_by_severity: Mapping[str, int] = msgspec.field(default_factory=dict)
    worst: Annotated[str | None, Meta(description="the highest severity found; null with no findings")] = None
    violations: int = 0

    @classmethod
    def of(cls, findings: Sequence[Finding], violations: Sequence[Outcome]) -> "Summary":
        counts = {s: 0 for s in RANK}
        for f in findings:
            counts[f.severity] = counts.get(f.severity, 0) + 1
        worst = max((f.severity for f in findings), key=lambda s: RANK.get(s, -1), default=None)
        return cls(findings_by_severity=counts, worst=worst, violations=len(violations))


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """The diagnosis report: `tracedoc diagnose --format json` prints the same object. Findings
    carry their report ids ("F1"...), time-ordered. `summary` is derived from the findings and
    violations when the report is made or read (`msgspec.structs.replace` does not recompute it:
    make a new `Report` to change them)."""
    version: int = REPORT_VERSION
    trace: TraceSummary = msgspec.field(default_factory=TraceSummary)
    findings: tuple[Finding, ...] = ()
    violations: tuple[Outcome, ...] = ()
    clusters: tuple[Cluster, ...] = ()
    rule_errors: tuple[RuleFailure, ...] = ()
    suppressed: tuple[Suppression, ...] = ()
    summary: Summary = msgspec.field(default_factory=Summary)
    # HTA-style figures (diagnosis.engine.breakdowns.Breakdowns.to_dict()): shown, never judged
    breakdowns: Mapping[str, Any] = msgspec.field(default_factory=dict)
    # headline figures of the trace (diagnosis.engine.trace_figures.headline_slis): time to first token
    # and GPU busy, None where the trace cannot give them; stored so diffs and /metrics need no events
    slis: Annotated[Mapping[str, float | None], Meta(
        description="headline figures; absent in reports stored before them",
        extra_json_schema={"properties": {
            "ttft_ms": {"anyOf": [{"type": "number"}, {"type": "null"}],
                        "description": "time to first token: the first token-emitting step"},
            "gpu_busy_pct": {"anyOf": [{"type": "number"}, {"type": "null"}],
                             "description": "steady-state GPU busy share (feature gpu_activity)"}}})] = \
        msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "summary", Summary.of(self.findings, self.violations))

    def finding(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    def to_json(self) -> bytes:
        """The JSON report: numpy scalars as plain numbers, NaN as null."""
        return _ENCODER.encode(self)

    def to_dict(self) -> dict:
        """The JSON report as Python values (what a JSON column stores)."""
        return json_values(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Report":
        """A JSON report read back (a stored one, a server's answer). A key missing or null
        (where the report never writes null) takes its default, as in reports stored before it."""
        return msgspec.convert(_nulls_dropped(d, _REPORT_TYPE), cls, strict=False, dec_hook=_decode_hook)


def _encode_hook(value: Any) -> Any:
    """numpy scalars and friends -> plain values; anything else JSON lacks -> its text."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (ValueError, TypeError):
            pass
    return str(value)


def _decode_hook(kind: type, value: Any) -> Any:
    if kind is SLOOutcome:
        outcome = FailedSLO if isinstance(value, Mapping) and "error" in value else Violation
        return msgspec.convert(_nulls_dropped(value, _OUTCOME_TYPES[outcome]), outcome, strict=False)
    raise NotImplementedError(kind)


def _nulls_dropped(value: Any, kind: msgspec.inspect.Type) -> Any:
    """`value` with the null fields of each Struct in it left out (so they take their defaults);
    free-form mappings (metrics, series, slis) keep theirs."""
    while isinstance(kind, msgspec.inspect.Metadata):
        kind = kind.type
    if isinstance(kind, msgspec.inspect.UnionType):
        structs = [t for t in kind.types if isinstance(t, msgspec.inspect.StructType)]
        kind = structs[0] if len(structs) == 1 else kind
    if isinstance(kind, msgspec.inspect.StructType) and isinstance(value, Mapping):
        fields = {f.encode_name: f.type for f in kind.fields}
        return {k: _nulls_dropped(v, fields[k]) if k in fields else v
                for k, v in value.items() if v is not None or k not in fields}
    if isinstance(kind, msgspec.inspect.VarTupleType) and isinstance(value, list):
        return [_nulls_dropped(v, kind.item_type) for v in value]
    return value


def _schema_hook(kind: type) -> dict[str, Any]:
    if kind is SLOOutcome:
        return {"anyOf": [{"$ref": REF_TEMPLATE.format(name=t.__name__)} for t in (Violation, FailedSLO)]}
    raise NotImplementedError(kind)


_REPORT_TYPE = msgspec.inspect.type_info(Report)
_OUTCOME_TYPES = {t: msgspec.inspect.type_info(t) for t in (Violation, FailedSLO)}
_ENCODER = msgspec.json.Encoder(enc_hook=_encode_hook)
_DECODER = msgspec.json.Decoder()
REF_TEMPLATE = "#/components/schemas/{name}"


def report_schema_components() -> dict[str, Any]:
    """JSON Schema of the report and every type in it, by name ("Report", "Finding"...), with
    references as `REF_TEMPLATE` writes them."""
    _, components = msgspec.json.schema_components((Report, Violation, FailedSLO, CapturePlan),
                                                   schema_hook=_schema_hook, ref_template=REF_TEMPLATE)
    return components


def json_values(value: Any) -> Any:
    """numpy scalars and friends -> plain JSON types (NaN -> null, tuples -> lists), as the report writes them."""
    return _DECODER.decode(_ENCODER.encode(value))


def rule_failures(errors: Sequence[Mapping[str, str]]) -> tuple[RuleFailure, ...]:
    """The rule engine's {rule_id, error} entries as typed values."""
    return tuple(RuleFailure(rule_id=e["rule_id"], error=e["error"]) for e in errors)
