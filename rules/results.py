"""What the rule engine finds: a `Finding` and its `Evidence` rows, immutable.

The evaluator builds them, clustering and the report read them and give new ones
(`dataclasses.replace`) instead of changing them; they become JSON only at the edge
(`to_dict`, the report's `Report.to_dict`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from rules.capture_plans import CapturePlan


@dataclass(frozen=True)
class Evidence:
    """One event row a finding rests on: where it is (file and location) and what it says."""
    artifact: str
    loc: str
    ts: int
    text: str

    def to_dict(self) -> dict:
        return {"artifact": self.artifact, "loc": self.loc, "ts": self.ts, "text": self.text}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Evidence":
        return cls(artifact=str(d.get("artifact") or ""), loc=str(d.get("loc") or ""),
                   ts=int(d.get("ts") or 0), text=str(d.get("text") or ""))


@dataclass(frozen=True)
class Finding:
    """One firing of one rule. `id`, `cluster` and `consequence_of` are the report's ("F3",
    "C1", "F1"): empty until the report numbers and clusters the findings."""
    rule_id: str
    title: str
    severity: str
    rule_version: int = 1
    root_cause: str = ""
    slo: str | None = None
    start_ts: int = 0
    end_ts: int = 0
    explanation: str = ""
    recommendations: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    # metrics and keys hold the evaluator's plain values (numbers, text, None); never changed
    # after construction: `with_metrics` gives a new finding
    metrics: Mapping[str, Any] = field(default_factory=dict)
    group: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    causes: tuple[str, ...] = ()
    suppresses: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    capture: CapturePlan | None = None  # the capture that would decide it (the rule's `capture:`)
    id: str = ""
    cluster: str | None = None
    consequence_of: str | None = None

    @property
    def cause_key(self) -> str:
        """What groups findings of one root cause: the root cause, else the rule id."""
        return self.root_cause or self.rule_id

    def with_metrics(self, **extra: Any) -> "Finding":
        return dataclasses.replace(self, metrics={**self.metrics, **extra})

    def to_dict(self) -> dict:
        """The engine's view (what rule tests and tools read): every field but the report's."""
        return {
            "rule_id": self.rule_id, "rule_version": self.rule_version, "title": self.title,
            "severity": self.severity, "root_cause": self.root_cause, "slo": self.slo,
            "start_ts": self.start_ts, "end_ts": self.end_ts, "explanation": self.explanation,
            "recommendations": list(self.recommendations), "references": list(self.references),
            "evidence": [e.to_dict() for e in self.evidence], "metrics": dict(self.metrics),
            "group": dict(self.group), "fingerprint": dict(self.fingerprint), "causes": list(self.causes),
            "suppresses": list(self.suppresses), "tags": list(self.tags),
            **({"capture": self.capture.to_dict()} if self.capture else {}),
        }
