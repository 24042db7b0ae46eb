"""Per-selection counts and the first matching rows of one rule over one trace's events:
what the rule editor's "Test against a trace" shows next to the findings (the CLI's
`rules test` prints the same counts when a rule stays quiet)."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rules import limits
from rules.budget import Budget
from rules.compiler import CompiledRule
from rules.features import TraceContext
from rules.masks import ALL, TraceMasks

SAMPLE_ROWS = 5
# The columns a matched row is shown with (when the table has them): enough to find the row.
SHOWN_COLUMNS = ("ts", "dur", "kind", "name", "artifact", "device", "stream", "pid", "tid", "value", "loc")


@dataclass(frozen=True)
class SelectionSample:
    name: str
    table: str            # "events" or the feature the selection reads
    count: int
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _cell(value) -> str:
    return "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


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
                                   tuple(tuple(_cell(v) for v in r) for r in head.itertuples(index=False))))
    return out
