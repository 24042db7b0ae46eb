"""Aggregates over row ranges, and the `having` test over them.

Rows are one rule's matching rows, ordered by group and time; a group, a tumbling window or
a sliding window is a range [start, stop) of that order, so every aggregate is computed for
all ranges at once: count/sum/mean/rate from cumulative sums, min/max with reduceat (which
handles overlapping ranges), percentiles and distinct per range.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from rules.engine.expressions import And, Aggregate, Arithmetic, Having, Negate, Not, Number, Or, Text

PERCENTILES = {"p50": 50, "p90": 90, "p95": 95, "p99": 99}
MIN_RATE_SPAN_NS = 1_000_000


def range_metrics(wanted, values, starts: np.ndarray, stops: np.ndarray, ts: np.ndarray,
                  ends: np.ndarray, window_ns: int | None, budget) -> dict:
    """{(fn, field): array over ranges}. `values(field)` gives the rows' values (numpy,
    object or float); ts/ends are the rows' start and end times in ns."""
    out: dict = {("count", None): (stops - starts).astype(np.int64)}
    count = out[("count", None)]
    for fn, field in wanted:
        if (fn, field) in out:
            continue
        if fn == "rate":
            if window_ns:
                span = np.full(len(starts), float(window_ns))
            else:
                span = np.maximum(_reduce(np.maximum, ends, starts, stops, -np.inf) - ts[starts], MIN_RATE_SPAN_NS)
            out[(fn, field)] = count / (span / 1e9)
        elif fn in ("first", "last"):
            raw = values(field)
            out[(fn, field)] = raw[starts] if fn == "first" else raw[stops - 1]
        elif fn == "distinct":
            codes = pd.factorize(pd.Series(values(field), dtype=object).map(_hashable))[0]
            out[(fn, field)] = np.fromiter((len(np.unique(codes[s:e])) for s, e in zip(starts, stops)),
                                           np.int64, len(starts))
        else:
            num = numeric(values(field))
            valid = ~np.isnan(num)
            n = _cumulative(valid.astype(np.float64), starts, stops)
            if fn == "sum":
                out[(fn, field)] = _cumulative(np.where(valid, num, 0.0), starts, stops)
            elif fn == "mean":
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[(fn, field)] = _cumulative(np.where(valid, num, 0.0), starts, stops) / n
            elif fn in ("min", "max"):
                ufunc, pad = (np.minimum, np.inf) if fn == "min" else (np.maximum, -np.inf)
                r = _reduce(ufunc, np.where(valid, num, pad), starts, stops, pad)
                out[(fn, field)] = np.where(n > 0, r, np.nan)
            else:
                q = PERCENTILES[fn]
                res = np.empty(len(starts))
                for i, (s, e) in enumerate(zip(starts, stops)):
                    chunk = num[s:e]
                    chunk = chunk[~np.isnan(chunk)]
                    res[i] = np.percentile(chunk, q) if len(chunk) else np.nan
                    if i % 2048 == 2047:
                        budget.check(f"computing {fn}({field})")
                out[(fn, field)] = res
        budget.check(f"computing {fn}({field or ''})")
    return out


def numeric(raw) -> np.ndarray:
    if isinstance(raw, np.ndarray) and raw.dtype.kind in "fiub":
        return raw.astype(np.float64, copy=False)
    return pd.to_numeric(pd.Series(raw, dtype=object).map(_scalar), errors="coerce").to_numpy(np.float64)


def _scalar(v):
    return v if isinstance(v, (int, float, str, bool)) else None


def _hashable(v):
    return v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)


def _cumulative(arr: np.ndarray, starts, stops) -> np.ndarray:
    cs = np.concatenate(([0.0], np.cumsum(arr)))
    return cs[stops] - cs[starts]


def _reduce(ufunc, arr: np.ndarray, starts, stops, pad) -> np.ndarray:
    """ufunc over each arr[start:stop] (ranges non-empty, possibly overlapping)."""
    padded = np.append(arr, pad)
    idx = np.empty(2 * len(starts), dtype=np.int64)
    idx[0::2], idx[1::2] = starts, stops
    return ufunc.reduceat(padded, idx)[0::2]


# ---------------------------------------------------------------- having

def evaluate_having(node: Having, metrics: dict) -> np.ndarray:
    """Boolean array over ranges; comparisons with NaN are false."""
    return _truth(_eval(node, metrics))


_ARITHMETIC = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide}
_COMPARISONS = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                "==": np.equal, "!=": np.not_equal}


def _eval(node: Having, m):
    if isinstance(node, (Number, Text)):
        return node.value
    if isinstance(node, Aggregate):
        return m[node.key]
    if isinstance(node, Negate):
        return -_as_float(_eval(node.operand, m))
    if isinstance(node, Not):
        return ~_truth(_eval(node.operand, m))
    if isinstance(node, And):
        return np.logical_and.reduce([_truth(_eval(n, m)) for n in node.terms])
    if isinstance(node, Or):
        return np.logical_or.reduce([_truth(_eval(n, m)) for n in node.terms])
    a, b = _eval(node.left, m), _eval(node.right, m)
    with np.errstate(all="ignore"):
        if isinstance(node, Arithmetic):
            return _ARITHMETIC[node.op](_as_float(a), _as_float(b))
        if isinstance(a, str) or isinstance(b, str) or _is_object(a) or _is_object(b):
            a, b = _as_text(a), _as_text(b)
            if node.op in ("==", "!="):
                eq = np.asarray(a == b, dtype=bool)
                return eq if node.op == "==" else ~eq
        else:
            a, b = _as_float(a), _as_float(b)
        return np.asarray(_COMPARISONS[node.op](a, b), dtype=bool)


def _is_object(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == object


def _as_text(x):
    if isinstance(x, np.ndarray):
        return np.asarray([str(v) for v in x], dtype=object)
    return str(x)


def _as_float(x):
    if isinstance(x, np.ndarray):
        return numeric(x) if x.dtype == object else x.astype(np.float64, copy=False)
    return float(x) if not isinstance(x, str) else np.nan


def _truth(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype == bool:
        return x
    f = _as_float(x) if x.dtype != object else numeric(x)
    with np.errstate(invalid="ignore"):
        return (f != 0) & ~np.isnan(f)
