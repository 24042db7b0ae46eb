"""What the rule engine finds: a `Finding` and its `Evidence` rows, immutable msgspec Structs.

A `Finding` is what the report lists (diagnosis.engine.results.Report): its fields, in order, are the
JSON report's keys, so `msgspec.json.encode` writes it and `msgspec.convert` reads it back. The
evaluator gives a `RuleFinding`: a finding with what only grouping reads (the rule's group and
fingerprint values, its `causes`, `suppresses` and `tags`), which the report leaves out.
Clustering and the report give new values (`msgspec.structs.replace`) instead of changing them.
"""
from __future__ import annotations

from typing import Annotated, Any, Mapping, Self

import msgspec
from msgspec import UNSET, Meta, UnsetType

from rules.engine.capture_plans import CapturePlan
from rules.engine.severity import SEVERITIES

Severity = Annotated[str, Meta(extra_json_schema={"enum": list(SEVERITIES)})]


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """One event row a finding rests on: where it is (file and location) and what it says."""
    artifact: Annotated[str, Meta(description="the file the evidence is in")] = ""
    loc: Annotated[str, Meta(description="where in it: 'line 12', 'line 3-9', 'event 41', or empty")] = ""
    ts: Annotated[int, Meta(description="ns on the trace's common clock")] = 0
    text: str = ""


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One firing of one rule, as the report lists it. `id`, `cluster` and `consequence_of` are
    the report's ("F3", "C1", "F1"): empty until the report numbers and clusters the findings.
    `capture`: the capture that would decide it (the rule's `capture:`), absent when none."""
    id: Annotated[str, Meta(description="F1, F2... in time order")] = ""
    rule_id: str
    rule_version: int = 1
    title: str
    severity: Severity
    root_cause: str = ""
    slo: str | None = None
    cluster: Annotated[str | None, Meta(description="the id of the cluster it belongs to (C1...)")] = None
    start_ts: int = 0
    end_ts: int = 0
    explanation: str = ""
    recommendations: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    # the evaluator's plain values (numbers, text, None); never changed after construction:
    # `with_metrics` gives a new finding
    metrics: Annotated[Mapping[str, Any], Meta(description="the rule's figures (numbers, text or null)")] = \
        msgspec.field(default_factory=dict)
    consequence_of: Annotated[str | None, Meta(description="the finding this one follows from")] = None
    capture: CapturePlan | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.capture is None:  # callers that hold "no plan" as None
            msgspec.structs.force_setattr(self, "capture", UNSET)

    @property
    def cause_key(self) -> str:
        """What groups findings of one root cause: the root cause, else the rule id."""
        return self.root_cause or self.rule_id

    def with_metrics(self, **extra: Any) -> Self:
        return msgspec.structs.replace(self, metrics={**self.metrics, **extra})


class RuleFinding(Finding, frozen=True, kw_only=True):
    """A finding as the evaluator gives it: with the rule's grouping values and relations, which
    clustering and suppression read and the report leaves out (`reported`)."""
    group: Mapping[str, Any] = msgspec.field(default_factory=dict)
    fingerprint: Mapping[str, Any] = msgspec.field(default_factory=dict)
    causes: tuple[str, ...] = ()
    suppresses: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    def reported(self, **changes: Any) -> Finding:
        """The finding as the report lists it, with `changes` (its id, cluster...)."""
        values = {name: getattr(self, name) for name in Finding.__struct_fields__}
        return Finding(**{**values, **changes})
