"""A condition rule's matching rows -> matches: one for all rows, or one per group or window.

Rows are ordered by group then time; each group, tumbling window or sliding window is a
range [start, stop) of that order, so `rules.engine.aggregate.range_metrics` computes every
aggregate for all ranges at once and the `having` test keeps the ranges that hold.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rules.engine import limits
from rules.engine.aggregate import evaluate_having, range_metrics
from rules.engine.attrs import AttrReader, RowRef, field_values, plain
from rules.engine.budget import Budget
from rules.engine.compiler import AggregateSpec, CompiledRule
from rules.engine.errors import EvalError
from rules.engine.expressions import having_aggregates, metric_name
from rules.engine.matches import Match, Matches
from rules.engine.modifiers import json_text
from rules.engine.quantities import human_duration


def group_key(v):
    """Group key of a value: numpy scalars to Python, NaN/None to ''."""
    v = plain(v)
    if v is None:
        return ""
    return v if isinstance(v, (int, float, str, bool)) else json_text(v)


class Aggregation:
    """Rows of one rule -> matches: one for all rows, or one per group/window."""

    def __init__(self, cr: CompiledRule, span: tuple[int, int], table: pd.DataFrame, attrs: AttrReader,
                 rows: np.ndarray, budget: Budget):
        self.cr, self.span, self.table, self.attrs, self.budget = cr, span, table, attrs, budget
        self.agg = cr.aggregate
        self.rows = rows
        self._values: dict[str, np.ndarray] = {}

    def values(self, field: str) -> np.ndarray:
        if field not in self._values:
            self._values[field] = field_values(self.table, self.attrs, field, self.rows)
        return self._values[field]

    def matches(self) -> Matches:
        agg, n = self.agg, len(self.rows)
        if agg is None or (not agg.by and agg.window_ns is None):
            starts, stops = np.array([0]), np.array([n])
        else:
            gid = self._group_ids(agg)
            order = np.argsort(gid, kind="stable")      # rows stay time-ordered within a group
            self._reorder(order)
            gid = gid[order]
            starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
            stops = np.r_[starts[1:], n]
            if agg.sliding:
                assert agg.window_ns is not None  # the compiler refuses a sliding aggregate without one
                starts, stops = self._sliding(starts, stops, agg.window_ns)
        return self._emit(starts, stops)

    def _reorder(self, order: np.ndarray) -> None:
        self.rows = self.rows[order]
        self._values = {k: v[order] for k, v in self._values.items()}

    def _group_ids(self, agg: AggregateSpec) -> np.ndarray:
        codes = [pd.factorize(pd.Series(self.values(f), dtype=object).map(group_key))[0] for f in agg.by]
        if agg.window_ns and not agg.sliding:
            lo, hi = self.span
            buckets = (hi - lo) // agg.window_ns + 1
            if buckets > limits.MAX_WINDOWS:
                raise EvalError(f"window {human_duration(agg.window_ns)} makes {buckets:,} buckets over the "
                                f"trace's {human_duration(hi - lo)} (limit {limits.MAX_WINDOWS:,}); use a longer window")
            codes.append((self.table["ts"].to_numpy()[self.rows] - lo) // agg.window_ns)
        self.budget.check("grouping")
        if not codes:
            return np.zeros(len(self.rows), dtype=np.int64)
        if len(codes) == 1:
            return np.asarray(codes[0], dtype=np.int64)
        return np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)[1].reshape(-1)

    def _sliding(self, starts: np.ndarray, stops: np.ndarray, window_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """Windows [t, t + window] anchored at each row; the windows whose having holds
        are merged when they overlap, so a burst is one finding."""
        if len(self.rows) > limits.MAX_SLIDING_WINDOWS:
            raise EvalError(f"sliding window over {len(self.rows):,} matching rows "
                            f"(limit {limits.MAX_SLIDING_WINDOWS:,}); use a tumbling window or a narrower match")
        ts = self.table["ts"].to_numpy()[self.rows]
        per_group_starts, per_group_stops = [], []
        for s, e in zip(starts, stops):
            per_group_starts.append(np.arange(s, e))
            per_group_stops.append(s + np.searchsorted(ts[s:e], ts[s:e] + window_ns, side="right"))
        w_starts, w_stops = np.concatenate(per_group_starts), np.concatenate(per_group_stops)
        fire = self._having(w_starts, w_stops, window_ns)
        group_of = np.repeat(np.arange(len(starts)), stops - starts)   # windows never cross groups
        merged_starts: list[int] = []
        merged_stops: list[int] = []
        merged_group: list[int] = []
        for s, e, g in zip(w_starts[fire], w_stops[fire], group_of[fire]):
            if merged_group and merged_group[-1] == g and s < merged_stops[-1]:
                merged_stops[-1] = max(merged_stops[-1], e)
            else:
                merged_starts.append(s)
                merged_stops.append(e)
                merged_group.append(g)
        self.budget.check("merging sliding windows")
        return np.asarray(merged_starts, dtype=np.int64), np.asarray(merged_stops, dtype=np.int64)

    def _metrics(self, starts, stops, window_ns) -> dict:
        ts = self.table["ts"].to_numpy()[self.rows]
        ends = ts + self.table["dur"].to_numpy()[self.rows]
        wanted = set(self.cr.metrics)
        if self.agg and self.agg.having:
            wanted |= having_aggregates(self.agg.having)
        return range_metrics(sorted(wanted, key=lambda m: metric_name(*m)), self.values, starts, stops,
                             ts, ends, window_ns, self.budget)

    def _having(self, starts, stops, window_ns) -> np.ndarray:
        if not self.agg or not self.agg.having:
            return np.ones(len(starts), dtype=bool)
        metrics = self._metrics(starts, stops, window_ns)
        return np.broadcast_to(evaluate_having(self.agg.having, metrics), (len(starts),))

    def _emit(self, starts: np.ndarray, stops: np.ndarray) -> Matches:
        agg = self.agg
        sliding = bool(agg and agg.sliding)
        window = agg.window_ns if agg and agg.window_ns and not sliding else None
        if not sliding:
            keep = self._having(starts, stops, window)
            starts, stops = starts[keep], stops[keep]
        if not len(starts):
            return Matches.none()
        ts = self.table["ts"].to_numpy()[self.rows]
        ends = ts + self.table["dur"].to_numpy()[self.rows]
        order = np.argsort(ts[starts], kind="stable")
        starts, stops = starts[order], stops[order]
        total = len(starts)
        starts, stops = starts[:limits.MAX_FINDINGS_PER_RULE], stops[:limits.MAX_FINDINGS_PER_RULE]
        metrics = self._metrics(starts, stops, window)
        by = agg.by if agg else ()
        found = []
        for i, (s, e) in enumerate(zip(starts, stops)):
            group = {f: plain(self.values(f)[s]) for f in by}
            m = {metric_name(*k): v[i] for k, v in metrics.items() if k[0] not in ("first", "last")}
            picks: list[int] | range
            if e - s > limits.MAX_EVIDENCE:
                picks = list(range(s, s + limits.MAX_EVIDENCE - 1)) + [e - 1]
            else:
                picks = range(s, e)
            refs = [RowRef(self.table, self.attrs, int(self.rows[p])) for p in picks]
            found.append(Match(refs, int(ts[s]), int(ends[s:e].max()), m, group))
            if i % 64 == 63:
                self.budget.check("building findings")
        return Matches(found, total)
