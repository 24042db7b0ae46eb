"""The loaded rule: what the loader checked and the compiler, the evaluator and the API read."""
from __future__ import annotations

from dataclasses import dataclass, field

from rules.engine.capture_plans import CapturePlan, parse_plan
from rules.engine.rule_yaml import unmarked


@dataclass
class Rule:
    """A validated rule: each key of the document as an attribute (what the compiler reads),
    `data` the document as loaded (what the API shows and the pack cache stores), `source`
    its YAML text."""
    id: str
    version: int
    title: str
    status: str
    severity: str
    data: dict
    file: str = "<text>"
    line: int = 1
    source: str = ""
    owner: str = ""
    tags: list = field(default_factory=list)
    root_cause: str = ""
    slo: str | None = None
    description: str = ""
    explain: str = ""
    recommend: list = field(default_factory=list)
    references: list = field(default_factory=list)
    fingerprint: list = field(default_factory=list)
    causes: list = field(default_factory=list)
    suppresses: list = field(default_factory=list)
    tests: dict = field(default_factory=dict)
    match: dict = field(default_factory=dict)     # selection name -> spec
    condition: str | None = None                  # absent in a sequence rule
    aggregate: dict | None = None
    sequence: dict | None = None
    capture: dict | None = None

    @classmethod
    def from_data(cls, data: dict, file: str, line: int, source: str) -> "Rule":
        keys = ("owner", "tags", "root_cause", "slo", "description", "explain", "recommend", "references",
                "fingerprint", "causes", "suppresses", "tests", "match", "condition", "aggregate", "sequence",
                "capture")
        return cls(id=data["id"], version=data["version"], title=data["title"], status=data["status"],
                   severity=data["severity"], data=unmarked(data), file=str(file), line=line, source=source,
                   **{k: unmarked(data[k]) for k in keys if k in data})

    def to_dict(self) -> dict:
        return {**self.data, "file": self.file, "line": self.line}

    @property
    def capture_plan(self) -> CapturePlan | None:
        """The capture that would decide this rule's findings (checked when the rule was loaded)."""
        return parse_plan(self.capture) if self.capture is not None else None
