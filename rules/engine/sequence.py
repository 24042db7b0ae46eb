"""`sequence: {steps: [a, b, c], within: W, by: K}` -> matches.

a, then b, then c on the same keys, all within W of a. Each step reads its own selection
(possibly from a feature). Every a whose chain completes is a match; of several a's reaching
the same last row, the latest counts. With `absent: x`, a chain that is *not* followed by x
within W matches instead, and the unmatched chains of one key group form one match.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rules.engine import limits
from rules.engine.attrs import AttrReader, RowRef, field_values, plain
from rules.engine.budget import Budget
from rules.engine.compiler import CompiledRule, SequenceSpec
from rules.engine.masks import ALL, TraceMasks, by_time
from rules.engine.matches import Match, Matches
from rules.engine.windows import group_key


@dataclass(frozen=True)
class StepRows:
    """The rows one step's selection matched, time-ordered, with their `by` key values."""
    name: str
    source: str | None
    table: pd.DataFrame
    attrs: AttrReader
    rows: np.ndarray
    keys: list[np.ndarray]


@dataclass(frozen=True)
class Chain:
    """One match: its group, its positions in the steps' concatenation, and whether it is a
    group of chains that the `absent` step never followed."""
    group: int
    positions: list[int]
    unmatched: bool


class SequenceMatcher:
    def __init__(self, cr: CompiledRule, masks: TraceMasks, budget: Budget):
        self.cr, self.masks, self.budget = cr, masks, budget
        assert cr.sequence is not None  # the evaluator makes a matcher for a sequence rule only
        self.seq: SequenceSpec = cr.sequence

    def _step(self, name: str) -> StepRows:
        sel = self.cr.selections[name]
        table_masks = self.masks.of(sel.source)
        table = table_masks.table
        rows = by_time(table, table_masks.selection(sel, ALL, self.budget))
        keys = [field_values(table, table_masks.attrs, f, rows) for f in self.seq.by]
        return StepRows(name, sel.source, table, table_masks.attrs, rows, keys)

    def matches(self) -> Matches:
        seq = self.seq
        names = list(seq.steps) + ([seq.absent] if seq.absent else [])
        steps = [self._step(n) for n in names]
        self.budget.check("matching the steps")
        if any(not len(s.rows) for s in steps[:len(seq.steps)]):
            return Matches.none()
        # one ordinal per distinct (ts, table, row) across steps: "after" means a larger ordinal
        ts_all = np.concatenate([s.table["ts"].to_numpy()[s.rows] for s in steps])
        tab_all = np.concatenate([np.full(len(s.rows), i, dtype=np.int64) for i, s in enumerate(steps)])
        table_ids: dict[str | None, int] = {}
        tab_key = np.array([table_ids.setdefault(s.source, len(table_ids)) for s in steps], dtype=np.int64)[tab_all]
        row_all = np.concatenate([s.rows for s in steps]).astype(np.int64)
        order = np.lexsort((row_all, tab_key, ts_all))
        new = np.r_[True, (np.diff(ts_all[order]) != 0) | (np.diff(tab_key[order]) != 0) | (np.diff(row_all[order]) != 0)]
        ordinal = np.empty(len(order), dtype=np.int64)
        ordinal[order] = np.cumsum(new)
        keys = [pd.Series(np.concatenate([s.keys[k] for s in steps]), dtype=object).map(group_key)
                for k in range(len(seq.by))]
        gid = (np.unique(np.stack([pd.factorize(k)[0] for k in keys], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
               if keys else np.zeros(len(ts_all), dtype=np.int64))
        bounds = np.r_[0, np.cumsum([len(s.rows) for s in steps])]
        per_step = [slice(bounds[i], bounds[i + 1]) for i in range(len(steps))]
        chains: list[Chain] = []
        for g in np.unique(gid[per_step[0]]):
            self.budget.check("following the sequence")
            chains.extend(self._chains(g, gid, ordinal, ts_all, per_step))
        return self._emit(chains, steps, bounds)

    def _chains(self, g, gid, ordinal, ts, per_step) -> list[Chain]:
        seq = self.seq
        n_steps = len(seq.steps)
        pos = [np.flatnonzero(gid[sl] == g) + sl.start for sl in per_step]
        pos = [p[np.argsort(ordinal[p], kind="stable")] for p in pos]
        chain = [pos[0]]
        alive = np.ones(len(pos[0]), dtype=bool)
        start_ts = ts[pos[0]]
        for k in range(1, n_steps):
            cand = pos[k]
            j = np.searchsorted(ordinal[cand], ordinal[chain[-1]], side="right")
            found = j < len(cand)
            nxt = cand[np.minimum(j, max(len(cand) - 1, 0))] if len(cand) else np.zeros(len(j), dtype=np.int64)
            alive &= found & (ts[nxt] - start_ts <= seq.within_ns) if len(cand) else np.zeros(len(j), dtype=bool)
            chain.append(nxt)
        if seq.absent:
            cand = pos[n_steps]
            if len(cand):
                j = np.searchsorted(ordinal[cand], ordinal[chain[-1]], side="right")
                nxt = cand[np.minimum(j, len(cand) - 1)]
                followed = (j < len(cand)) & (ts[nxt] - start_ts <= seq.within_ns)
            else:
                followed = np.zeros(len(alive), dtype=bool)
            alive &= ~followed
            idx = np.flatnonzero(alive)
            if not len(idx):
                return []
            return [Chain(g, [int(chain[k][i]) for i in idx for k in range(n_steps)], True)]
        idx = np.flatnonzero(alive)
        # several starts reaching the same last row: keep the latest start
        _, keep = np.unique(chain[-1][idx][::-1], return_index=True)
        idx = np.sort(idx[::-1][keep])
        return [Chain(g, [int(chain[k][i]) for k in range(n_steps)], False) for i in idx]

    def _emit(self, chains: list[Chain], steps: list[StepRows], bounds: np.ndarray) -> Matches:
        seq = self.seq

        def step_at(p: int) -> StepRows:
            return steps[int(np.searchsorted(bounds, p, side="right") - 1)]

        def ref(p: int) -> RowRef:
            i = int(np.searchsorted(bounds, p, side="right") - 1)
            return RowRef(steps[i].table, steps[i].attrs, int(steps[i].rows[p - bounds[i]]))

        chains.sort(key=lambda c: int(ref(c.positions[0]).get("ts") or 0))
        found = []
        for chain in chains[:limits.MAX_FINDINGS_PER_RULE]:
            positions = chain.positions
            refs = sorted((ref(p) for p in positions), key=lambda r: int(r.get("ts") or 0))
            named: dict[str, RowRef] = {}
            for p in positions:
                named.setdefault(step_at(p).name, ref(p))
            start_ts = int(refs[0].get("ts"))
            end_ts = max(int(r.get("ts")) + int(r.get("dur") or 0) for r in refs)
            first = steps[0]
            group = {f: plain(first.keys[k][positions[0]]) if positions[0] < bounds[1] else None
                     for k, f in enumerate(seq.by)}
            count = len(positions) // len(seq.steps) if chain.unmatched else 1
            metrics = {"count": count, "within_ms": seq.within_ns / 1e6}
            if not chain.unmatched:
                metrics["elapsed_ms"] = (int(refs[-1].get("ts")) - start_ts) / 1e6
            found.append(Match(refs, start_ts, end_ts, metrics, group, named))
            self.budget.check("building findings")
        return Matches(found, len(chains))
