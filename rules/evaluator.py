"""Evaluate compiled rules over one trace: masks -> groups/windows/sequences -> findings.

    findings, errors = evaluate_rules(compiled_rules, TraceContext(events))

Each rule runs on its own: an exception or an exhausted time budget is reported in
`errors` as {rule_id, error} and the other rules go on. Work is vectorized; attrs JSON
is parsed only for rows that survived the cheaper tests of the same selection.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa

from rules import limits
from rules.aggregate import evaluate_having, range_metrics
from rules.compiler import NUMBER_OPS, TEXT_OPS, CompiledRule, FieldTest, Selection
from rules.expressions import metric_name
from rules.features import TraceContext
from rules.quantities import human_duration


class RuleTimeout(RuntimeError):
    pass


class EvalError(RuntimeError):
    pass


class Budget:
    """Wall-clock allowance of one rule, checked between vectorized steps."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.deadline = time.perf_counter() + seconds

    def check(self, step: str) -> None:
        if time.perf_counter() > self.deadline:
            raise RuleTimeout(f"aborted: evaluation exceeded its time budget of {self.seconds:g}s while {step}")


def evaluate_rules(compiled_rules, ctx: TraceContext, time_budget_s: float = limits.RULE_TIME_BUDGET_S,
                   on_rule=None) -> tuple[list[dict], list[dict]]:
    """`on_rule(done, total)` is called before each rule (progress)."""
    findings, errors = [], []
    compiled_rules = list(compiled_rules)
    for i, cr in enumerate(compiled_rules):
        if on_rule is not None:
            on_rule(i, len(compiled_rules))
        try:
            findings.extend(evaluate_rule(cr, ctx, Budget(time_budget_s)))
        except RuleTimeout as e:
            errors.append({"rule_id": cr.id, "error": str(e)})
        except Exception as e:  # one failing rule never stops the others
            errors.append({"rule_id": cr.id, "error": f"{type(e).__name__}: {e}"})
    return findings, errors


def precompute_features(compiled_rules, ctx: TraceContext) -> None:
    """Compute, once each, the features the rules read (a progress stage of its own; a
    feature that fails is remembered and reported by each rule that reads it)."""
    for cr in compiled_rules:
        for sel in cr.selections.values():
            if sel.source is not None:
                try:
                    ctx.feature(sel.source)
                except Exception:
                    pass


def evaluate_rule(cr: CompiledRule, ctx: TraceContext, budget: Budget | None = None) -> list[dict]:
    budget = budget or Budget(limits.RULE_TIME_BUDGET_S)
    if cr.sequence:
        return _Sequence(cr, ctx, budget).findings()
    table = ctx.table(cr.source)
    budget.check("reading the table")
    matcher = Matcher(table, budget)
    mask = matcher.condition(cr.condition, cr.selections, np.ones(len(table), dtype=bool))
    rows = _by_time(table, np.flatnonzero(mask))
    if not len(rows):
        return []
    return _Aggregation(cr, ctx, table, rows, budget).findings()


def selection_counts(cr: CompiledRule, ctx: TraceContext) -> dict[str, int]:
    """Rows each selection matches on its own: tells a rule author why a rule stayed quiet."""
    out = {}
    for name, sel in cr.selections.items():
        table = ctx.table(sel.source)
        matcher = Matcher(table, Budget(limits.RULE_TIME_BUDGET_S))
        out[name] = int(matcher.selection(sel, np.ones(len(table), dtype=bool)).sum())
    return out


def _by_time(table: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    ts = table["ts"].to_numpy()[rows]
    if len(ts) > 1 and not (np.diff(ts) >= 0).all():
        rows = rows[np.argsort(ts, kind="stable")]
    return rows


# ---------------------------------------------------------------- masks

class Matcher:
    """Masks over one table. Cheap (column) tests are computed over the whole table once
    per rule and cached; attrs tests run only on the rows still in play."""

    def __init__(self, table: pd.DataFrame, budget: Budget):
        self.table, self.budget = table, budget
        self.attrs = AttrReader(table)
        self._cheap: dict[FieldTest, np.ndarray] = {}

    def condition(self, node, selections: dict[str, Selection], domain: np.ndarray) -> np.ndarray:
        tag = node[0]
        if tag == "sel":
            return self.selection(selections[node[1]], domain)
        if tag == "not":
            return domain & ~self.condition(node[1], selections, domain)
        if tag == "and":
            m = domain
            for term in node[1]:
                m = self.condition(term, selections, m)
                if not m.any():
                    break
            return m
        if tag == "or":
            return self._any([lambda d, t=t: self.condition(t, selections, d) for t in node[1]], domain)
        quantity, names = node[1], node[2]     # "of"
        if quantity == "all":
            return self.condition(("and", [("sel", n) for n in names]), selections, domain)
        hits = sum(self.selection(selections[n], domain).astype(np.int32) for n in names)
        return hits >= quantity

    def selection(self, sel: Selection, domain: np.ndarray) -> np.ndarray:
        return self._any([lambda d, alt=alt: self._all_of(alt, d) for alt in sel.alternatives], domain)

    def _any(self, terms, domain: np.ndarray) -> np.ndarray:
        result, rest = np.zeros_like(domain), domain.copy()
        for term in terms:
            if not rest.any():
                break
            hit = term(rest)
            result |= hit
            rest &= ~hit
        return result

    def _all_of(self, tests: tuple[FieldTest, ...], domain: np.ndarray) -> np.ndarray:
        m = domain.copy()
        for test in tests:
            if test.attr_path is None:
                m &= self._cheap_mask(test)
            else:
                rows = np.flatnonzero(m)
                if not len(rows):
                    break
                m[rows] = test_values(test, self.attrs.values(rows, test.attr_path))
            self.budget.check(f"testing {test.key}")
            if not m.any():
                break
        return m

    def _cheap_mask(self, test: FieldTest) -> np.ndarray:
        if test not in self._cheap:
            self._cheap[test] = column_mask(self.table, test)
        return self._cheap[test]


def column_mask(table: pd.DataFrame, test: FieldTest) -> np.ndarray:
    """Mask of a test on a (non-attrs) column, over every row of the table."""
    if test.field not in table.columns:
        if not len(table):
            return np.zeros(0, dtype=bool)
        raise EvalError(f"{test.key}: the table has no column {test.field!r} "
                        f"(columns: {', '.join(map(str, table.columns))})")
    col = table[test.field]
    if isinstance(col.dtype, pd.CategoricalDtype):
        per_category = test.on_categories(col.cat.categories)
        return np.append(per_category, False)[col.cat.codes.to_numpy()]  # code -1 (missing) -> False
    if col.dtype.kind in "fiub":
        numbers = col.to_numpy(dtype=np.float64)
        if test.op in TEXT_OPS:
            return test.on_strings(pa.array([_text(v) for v in col.tolist()], type=pa.string()))
        return test.on_numbers(numbers)
    return test.on_strings(column_strings(col))


def column_strings(col: pd.Series) -> pa.Array | pa.ChunkedArray:
    """A string column as Arrow: zero-copy when it is Arrow-backed (the event frame's attrs,
    loc and ids), else converted from the Python objects."""
    if isinstance(col.dtype, pd.ArrowDtype) and pa.types.is_string(col.dtype.pyarrow_dtype):
        return col.array.__arrow_array__()
    return _arrow_strings(col.to_numpy())


def test_values(test: FieldTest, values: list) -> np.ndarray:
    """Mask of a test on Python values taken from attrs JSON (numbers compare numerically)."""
    if test.op == "exists":
        present = np.fromiter((v is not None and v != "" for v in values), bool, len(values))
        return present if test.values[0] else ~present
    texts = pa.array([None if v is None else _text(v) for v in values], type=pa.string())
    if test.op in NUMBER_OPS:
        return test.on_numbers(_numbers(values))
    if test.op in TEXT_OPS:
        return test.on_strings(texts)
    return test.on_numbers(_numbers(values)) | test.on_strings(texts)


def _numbers(values: list) -> np.ndarray:
    from rules.aggregate import numeric
    return numeric(np.asarray(values, dtype=object)) if values else np.zeros(0)


def _text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return orjson.dumps(v).decode()
    return str(v)


def _arrow_strings(values: np.ndarray) -> pa.Array:
    try:
        return pa.array(values, type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else _text(v) for v in values], type=pa.string())


class AttrReader:
    """Values at dotted paths of the attrs JSON of chosen rows (parsed once per row)."""

    MAX_CACHED = 500_000

    def __init__(self, table: pd.DataFrame):
        self.column = _row_access(table["attrs"]) if "attrs" in table.columns else None
        self._parsed: dict[int, object] = {}

    def parsed(self, row: int):
        doc = self._parsed.get(row)
        if doc is None:
            raw = self.column(row) if self.column is not None else None
            try:
                doc = orjson.loads(raw) if raw else {}
            except orjson.JSONDecodeError:
                doc = {}
            if len(self._parsed) < self.MAX_CACHED:
                self._parsed[row] = doc
        return doc

    def value(self, row: int, path: tuple[str, ...]):
        node = self.parsed(row)
        for key in path:
            if isinstance(node, dict):
                node = node.get(key)
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return None
        return node

    def values(self, rows, path: tuple[str, ...]) -> list:
        return [self.value(int(r), path) for r in rows]


def _row_access(col: pd.Series):
    """row -> value of a column without converting the whole column to Python objects
    (an Arrow-backed column is read one row at a time)."""
    if isinstance(col.dtype, pd.ArrowDtype):
        arr = col.array.__arrow_array__()
        return lambda row: arr[row].as_py()
    values = col.to_numpy()
    return values.__getitem__


def field_values(table: pd.DataFrame, attrs: AttrReader, field: str, rows: np.ndarray) -> np.ndarray:
    """Values of a field (column, feature column or attrs.<path>) at rows, as a numpy array."""
    if field.startswith("attrs."):
        return np.asarray(attrs.values(rows, tuple(field.split(".")[1:])) + [None], dtype=object)[:-1]
    if field not in table.columns:
        if not len(rows):
            return np.zeros(0, dtype=object)
        raise EvalError(f"the table has no column {field!r} (columns: {', '.join(map(str, table.columns))})")
    col = table[field]
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = np.append(np.asarray(col.cat.categories, dtype=object), "")
        return cats[col.cat.codes.to_numpy()[rows]]
    if isinstance(col.dtype, pd.ArrowDtype):  # only the rows asked for become Python objects
        return np.asarray(col.array.take(rows).to_numpy(), dtype=object)
    return col.to_numpy()[rows]


def row_value(table: pd.DataFrame, attrs: AttrReader, row: int, field: str):
    if field.startswith("attrs."):
        return attrs.value(row, tuple(field.split(".")[1:]))
    if field not in table.columns:
        return None
    return _plain(table[field].iat[row])


def _plain(v):
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and v != v:
        return None
    return v


# ---------------------------------------------------------------- findings

@dataclass
class RowRef:
    table: pd.DataFrame
    attrs: AttrReader
    row: int

    def get(self, field: str):
        return row_value(self.table, self.attrs, self.row, field)


def make_finding(cr: CompiledRule, refs: list[RowRef], start_ts: int, end_ts: int, metrics: dict,
                 group: dict, named_rows: dict[str, RowRef] | None = None) -> dict:
    """One finding from its evidence rows (time-ordered), metrics and group keys."""
    rule = cr.rule
    first, last = refs[0], refs[-1]
    rows_by_root = {"first": first, "last": last, **(named_rows or {})}
    scalars = {"count": metrics.get("count"), "rate": metrics.get("rate"),
               "duration": human_duration(end_ts - start_ts), "start": start_ts, "end": end_ts}

    def lookup(path: tuple[str, ...]):
        name = ".".join(path)
        if name in group:
            return group[name]
        if path[0] == "metrics":
            key = ".".join(path[1:])
            return metrics.get(key, group.get(key))
        if path[0] in rows_by_root and len(path) > 1:
            return rows_by_root[path[0]].get(".".join(path[1:]))
        return scalars.get(name)

    if len(refs) > limits.MAX_EVIDENCE:
        refs = refs[:limits.MAX_EVIDENCE - 1] + [refs[-1]]
    fingerprint = {f: group[f] if f in group else first.get(f) for f in cr.fingerprint}
    return {
        "rule_id": rule.id, "rule_version": rule.version, "title": rule.title, "severity": rule.severity,
        "root_cause": rule.root_cause, "slo": rule.slo, "start_ts": int(start_ts), "end_ts": int(end_ts),
        "explanation": cr.explain.render(lookup),
        "recommendations": [t.render(lookup) for t in cr.recommend],
        "references": list(rule.references), "evidence": [_evidence(r) for r in refs],
        "metrics": {**{k: _plain(v) for k, v in metrics.items()}, **group},
        "group": dict(group), "fingerprint": {k: _plain(v) for k, v in fingerprint.items()},
        "causes": list(rule.causes), "suppresses": list(rule.suppresses), "tags": list(rule.tags),
    }


def _evidence(ref: RowRef) -> dict:
    text = ref.get("attrs.text") or ref.get("attrs.message") or ref.get("name") or ""
    text = _text(text)
    if len(text) > 500:
        text = text[:499] + "…"
    return {"artifact": str(ref.get("artifact") or ""), "loc": str(ref.get("loc") or ""),
            "ts": int(ref.get("ts") or 0), "text": text}


# ---------------------------------------------------------------- selection + aggregate

class _Aggregation:
    """Rows of one rule -> findings: one for all rows, or one per group/window."""

    def __init__(self, cr: CompiledRule, ctx: TraceContext, table: pd.DataFrame, rows: np.ndarray, budget: Budget):
        self.cr, self.ctx, self.table, self.budget = cr, ctx, table, budget
        self.attrs = AttrReader(table)
        self.agg = cr.aggregate
        self.rows = rows
        self._values: dict[str, np.ndarray] = {}

    def values(self, field: str) -> np.ndarray:
        if field not in self._values:
            self._values[field] = field_values(self.table, self.attrs, field, self.rows)
        return self._values[field]

    def findings(self) -> list[dict]:
        agg, n = self.agg, len(self.rows)
        if agg is None or (not agg.by and agg.window_ns is None):
            starts, stops = np.array([0]), np.array([n])
        else:
            gid = self._group_ids()
            order = np.argsort(gid, kind="stable")      # rows stay time-ordered within a group
            self._reorder(order)
            gid = gid[order]
            starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
            stops = np.r_[starts[1:], n]
            if agg.sliding:
                starts, stops = self._sliding(starts, stops)
        return self._emit(starts, stops)

    def _reorder(self, order: np.ndarray) -> None:
        self.rows = self.rows[order]
        self._values = {k: v[order] for k, v in self._values.items()}

    def _group_ids(self) -> np.ndarray:
        agg = self.agg
        codes = [pd.factorize(pd.Series(self.values(f), dtype=object).map(_key))[0] for f in agg.by]
        if agg.window_ns and not agg.sliding:
            lo, hi = self.ctx.span
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

    def _sliding(self, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Windows [t, t + window] anchored at each row; the windows whose having holds
        are merged when they overlap, so a burst is one finding."""
        if len(self.rows) > limits.MAX_SLIDING_WINDOWS:
            raise EvalError(f"sliding window over {len(self.rows):,} matching rows "
                            f"(limit {limits.MAX_SLIDING_WINDOWS:,}); use a tumbling window or a narrower match")
        ts = self.table["ts"].to_numpy()[self.rows]
        w_starts, w_stops = [], []
        for s, e in zip(starts, stops):
            w_starts.append(np.arange(s, e))
            w_stops.append(s + np.searchsorted(ts[s:e], ts[s:e] + self.agg.window_ns, side="right"))
        w_starts, w_stops = np.concatenate(w_starts), np.concatenate(w_stops)
        fire = self._having(w_starts, w_stops, self.agg.window_ns)
        group_of = np.repeat(np.arange(len(starts)), stops - starts)   # windows never cross groups
        merged_starts, merged_stops, merged_group = [], [], []
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
            from rules.expressions import having_aggregates
            wanted |= having_aggregates(self.agg.having)
        return range_metrics(sorted(wanted, key=lambda m: metric_name(*m)), self.values, starts, stops,
                             ts, ends, window_ns, self.budget)

    def _having(self, starts, stops, window_ns) -> np.ndarray:
        if not self.agg or not self.agg.having:
            return np.ones(len(starts), dtype=bool)
        metrics = self._metrics(starts, stops, window_ns)
        return np.broadcast_to(evaluate_having(self.agg.having, metrics), (len(starts),))

    def _emit(self, starts: np.ndarray, stops: np.ndarray) -> list[dict]:
        agg = self.agg
        sliding = bool(agg and agg.sliding)
        window = agg.window_ns if agg and agg.window_ns and not sliding else None
        if not sliding:
            keep = self._having(starts, stops, window)
            starts, stops = starts[keep], stops[keep]
        if not len(starts):
            return []
        ts = self.table["ts"].to_numpy()[self.rows]
        ends = ts + self.table["dur"].to_numpy()[self.rows]
        first_ts = ts[starts]
        order = np.argsort(first_ts, kind="stable")
        starts, stops = starts[order], stops[order]
        total = len(starts)
        starts, stops = starts[:limits.MAX_FINDINGS_PER_RULE], stops[:limits.MAX_FINDINGS_PER_RULE]
        metrics = self._metrics(starts, stops, window)
        by = agg.by if agg else ()
        findings = []
        for i, (s, e) in enumerate(zip(starts, stops)):
            group = {f: _plain(self.values(f)[s]) for f in by}
            m = {metric_name(*k): v[i] for k, v in metrics.items() if k[0] not in ("first", "last")}
            if e - s > limits.MAX_EVIDENCE:
                picks = list(range(s, s + limits.MAX_EVIDENCE - 1)) + [e - 1]
            else:
                picks = range(s, e)
            refs = [RowRef(self.table, self.attrs, int(self.rows[p])) for p in picks]
            start_ts = int(ts[s])
            end_ts = int(ends[s:e].max())
            findings.append(make_finding(self.cr, refs, start_ts, end_ts, m, group))
            if i % 64 == 63:
                self.budget.check("building findings")
        if total > len(findings):
            findings[-1]["metrics"]["truncated"] = total - len(findings)
        return findings


def _key(v):
    """Group key of a value: numpy scalars to Python, NaN/None to ''."""
    v = _plain(v)
    if v is None:
        return ""
    return v if isinstance(v, (int, float, str, bool)) else _text(v)


# ---------------------------------------------------------------- sequences

class _Sequence:
    """`steps: [a, b, c] within W by K`: a, then b, then c on the same keys, all within W of a.

    Each step reads its own selection (possibly from a feature). Every a whose chain
    completes is a match; of several a's reaching the same last row, the latest counts.
    With `absent: x`, a chain that is *not* followed by x within W matches instead, and
    the unmatched chains of one key group form one finding.
    """

    def __init__(self, cr: CompiledRule, ctx: TraceContext, budget: Budget):
        self.cr, self.ctx, self.budget = cr, ctx, budget
        self.seq = cr.sequence
        self.readers: dict[str | None, AttrReader] = {}

    def _step_rows(self, name: str):
        sel = self.cr.selections[name]
        table = self.ctx.table(sel.source)
        reader = self.readers.setdefault(sel.source, AttrReader(table))
        matcher = Matcher(table, self.budget)
        matcher.attrs = reader
        rows = _by_time(table, np.flatnonzero(matcher.selection(sel, np.ones(len(table), dtype=bool))))
        keys = [field_values(table, reader, f, rows) for f in self.seq.by]
        return sel.source, table, rows, keys

    def findings(self) -> list[dict]:
        seq = self.seq
        names = list(seq.steps) + ([seq.absent] if seq.absent else [])
        steps = [self._step_rows(n) for n in names]
        self.budget.check("matching the steps")
        if any(not len(s[2]) for s in steps[:len(seq.steps)]):
            return []
        # one ordinal per distinct (ts, table, row) across steps: "after" means a larger ordinal
        ts_all = np.concatenate([s[1]["ts"].to_numpy()[s[2]] for s in steps])
        tab_all = np.concatenate([np.full(len(s[2]), i, dtype=np.int64) for i, s in enumerate(steps)])
        table_ids = {}
        tab_key = np.array([table_ids.setdefault(s[0], len(table_ids)) for s in steps], dtype=np.int64)[tab_all]
        row_all = np.concatenate([s[2] for s in steps]).astype(np.int64)
        order = np.lexsort((row_all, tab_key, ts_all))
        new = np.r_[True, (np.diff(ts_all[order]) != 0) | (np.diff(tab_key[order]) != 0) | (np.diff(row_all[order]) != 0)]
        ordinal = np.empty(len(order), dtype=np.int64)
        ordinal[order] = np.cumsum(new)
        keys = [pd.Series(np.concatenate([s[3][k] for s in steps]), dtype=object).map(_key) for k in range(len(seq.by))]
        gid = (np.unique(np.stack([pd.factorize(k)[0] for k in keys], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
               if keys else np.zeros(len(ts_all), dtype=np.int64))
        bounds = np.r_[0, np.cumsum([len(s[2]) for s in steps])]
        per_step = [slice(bounds[i], bounds[i + 1]) for i in range(len(steps))]
        matches = []   # (group id, [positions in the concatenation], unmatched?)
        for g in np.unique(gid[per_step[0]]):
            self.budget.check("following the sequence")
            matches.extend(self._chains(g, gid, ordinal, ts_all, per_step))
        return self._emit(matches, steps, bounds, names)

    def _chains(self, g, gid, ordinal, ts, per_step):
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
            return [(g, [int(chain[k][i]) for i in idx for k in range(n_steps)], True)]
        idx = np.flatnonzero(alive)
        # several starts reaching the same last row: keep the latest start
        _, keep = np.unique(chain[-1][idx][::-1], return_index=True)
        idx = np.sort(idx[::-1][keep])
        return [(g, [int(chain[k][i]) for k in range(n_steps)], False) for i in idx]

    def _emit(self, matches, steps, bounds, names) -> list[dict]:
        seq = self.seq

        def ref(p: int) -> RowRef:
            i = int(np.searchsorted(bounds, p, side="right") - 1)
            source, table, rows, _ = steps[i]
            return RowRef(table, self.readers[source], int(rows[p - bounds[i]]))

        def step_of(p: int) -> str:
            return names[int(np.searchsorted(bounds, p, side="right") - 1)]

        total = len(matches)
        matches.sort(key=lambda m: int(ref(m[1][0]).get("ts") or 0))
        findings = []
        for g, positions, unmatched in matches[:limits.MAX_FINDINGS_PER_RULE]:
            refs = sorted((ref(p) for p in positions), key=lambda r: int(r.get("ts") or 0))
            named = {}
            for p in positions:
                named.setdefault(step_of(p), ref(p))
            start_ts = int(refs[0].get("ts"))
            end_ts = max(int(r.get("ts")) + int(r.get("dur") or 0) for r in refs)
            group = {f: _plain(steps[0][3][k][positions[0] - bounds[0]]) if positions[0] < bounds[1] else None
                     for k, f in enumerate(seq.by)}
            count = len(positions) // len(seq.steps) if unmatched else 1
            metrics = {"count": count, "within_ms": seq.within_ns / 1e6}
            if not unmatched:
                metrics["elapsed_ms"] = (int(refs[-1].get("ts")) - start_ts) / 1e6
            findings.append(make_finding(self.cr, refs, start_ts, end_ts, metrics, group, named))
            self.budget.check("building findings")
        if total > len(findings):
            findings[-1]["metrics"]["truncated"] = total - len(findings)
        return findings
