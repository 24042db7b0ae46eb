"""What a rule found, before it becomes a Finding (rules.engine.evaluator.make_finding)."""
from __future__ import annotations

from dataclasses import dataclass

from rules.engine.attrs import RowRef


@dataclass(frozen=True)
class Match:
    """Rows (time-ordered), span, metrics and group keys of one firing; for a sequence also
    the row of each named step ({step.field} placeholders)."""
    refs: list[RowRef]
    start_ts: int
    end_ts: int
    metrics: dict
    group: dict
    named_rows: dict[str, RowRef] | None = None


@dataclass(frozen=True)
class Matches:
    """A rule's matches, at most MAX_FINDINGS_PER_RULE; `total` counts the ones left out too."""
    items: list[Match]
    total: int

    @classmethod
    def none(cls) -> "Matches":
        return cls([], 0)
