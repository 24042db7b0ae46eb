"""Per-selection counts and the first matching rows of one rule over one trace's events:
what the rule editor's "Test against a trace" shows next to the findings (the CLI's
`rules test` prints the same counts when a rule stays quiet)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rules.engine import limits
from rules.engine.budget import Budget
from rules.engine.compiler import CompiledRule
from rules.engine.features import TraceContext
from rules.engine.masks import ALL, TraceMasks

SAMPLE_ROWS = 5
# The columns a matched row is shown with (when the table has them): enough to find the row.
SHOWN_COLUMNS = ("ts", "dur", "kind", "name", "artifact", "device", "stream", "pid", "tid", "value", "loc")


@dataclass(frozen=True)
class RowPlace:
    """Where a matched row is on the trace's timeline: its file and location, else its time."""
    ts: int
    dur: int = 0
    artifact: str = ""
    loc: str = ""


@dataclass(frozen=True)
class SelectionSample:
    name: str
    table: str            # "events" or the feature the selection reads
    count: int
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    places: tuple[RowPlace | None, ...] = ()  # each row's, None for a row without a time

    @property
    def placed_rows(self) -> list[tuple[tuple[str, ...], RowPlace | None]]:
        return list(zip(self.rows, self.places or (None,) * len(self.rows)))


def _cell(value) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _int(value) -> int:
    return 0 if value is None or pd.isna(value) else int(value)


def _places(head: pd.DataFrame) -> tuple[RowPlace | None, ...]:
    """A row with a time (ts > 0) has a place; the file and location come along where the
    table has them (the events table), so the timeline can find the very event."""
    if "ts" not in head.columns:
        return (None,) * len(head)
    out = []
    for _, row in head.iterrows():  # at most SAMPLE_ROWS rows
        ts = _int(row["ts"])
        out.append(RowPlace(ts=ts, dur=_int(row.get("dur")), artifact=_cell(row.get("artifact")),
                            loc=_cell(row.get("loc"))) if ts > 0 else None)
    return tuple(out)


def selection_samples(cr: CompiledRule, ctx: TraceContext, limit: int = SAMPLE_ROWS) -> list[SelectionSample]:
    masks, budget = TraceMasks(ctx), Budget(limits.RULE_TIME_BUDGET_S)
    out = []
    for name, sel in cr.selections.items():
        table_masks = masks.of(sel.source)
        rows = table_masks.every(table_masks.selection(sel, ALL, budget))
        table = table_masks.table
        columns = tuple(c for c in SHOWN_COLUMNS if c in table.columns) or tuple(map(str, table.columns[:8]))
        head = table.iloc[rows[:limit]][list(columns)]
        out.append(SelectionSample(name, sel.source or "events", len(rows), columns,
                                   tuple(tuple(_cell(v) for v in r) for r in head.itertuples(index=False)),
                                   _places(head)))
    return out
