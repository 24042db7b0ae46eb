"""The trace frame: one trace's events as the event table types them, and the column tools
every reader of that frame shares (the counterpart of HTA's hta/common/trace.py).

`TraceFrame` normalizes the events once (`as_event_frame`) and keeps the trace's span and a
lazy index of rows by kind. Rule features (rules.engine.features, whose TraceContext adds the
derived tables to a TraceFrame), breakdowns, SLIs and the timeline read it through these
helpers, which test strings once per distinct value rather than once per row.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import orjson
import pandas as pd

from ingest.engine.events import CATEGORY_COLUMNS, COLUMNS, DEFAULTS


_NUMPY_TYPES = {"ts": np.int64, "dur": np.int64, "pid": np.int64, "tid": np.int64, "device": np.int32,
                "stream": np.int64, "corr": np.int64, "value": np.float64}


def as_event_frame(df: pd.DataFrame | None) -> pd.DataFrame:
    """`df` with every event column present and typed as in the event table (missing columns
    take ingest.engine.events.DEFAULTS, category columns become Categorical); extra columns are kept.
    Rows are renumbered 0..n-1."""
    if df is None:
        df = pd.DataFrame()
    n = len(df)
    if _is_event_frame(df):  # what features build: no new columns, only a new frame over them
        return df.copy(deep=False)
    if not n:  # what most features find: the typed empty columns are made once
        empty = _empty_event_columns()
        out = {name: df[name] if name in df.columns and _typed(df[name], name) else empty[name] for name in COLUMNS}
    else:
        if not df.index.equals(pd.RangeIndex(n)):
            df = df.reset_index(drop=True)
        out = {name: _event_column(df, name, n) for name in COLUMNS}
    for extra in df.columns:
        if extra not in out:
            out[extra] = df[extra]
    return pd.DataFrame(out, index=pd.RangeIndex(n), copy=False)


def _is_event_frame(df: pd.DataFrame) -> bool:
    """Whether `df` is what as_event_frame would make of it: the event columns first, each of
    its type, and rows numbered 0..n-1."""
    index = df.index
    return (tuple(df.columns[:len(COLUMNS)]) == COLUMNS and isinstance(index, pd.RangeIndex)
            and index.start == 0 and index.step == 1 and all(_typed(df[name], name) for name in COLUMNS))


def _event_column(df: pd.DataFrame, name: str, n: int) -> pd.Series:
    default = DEFAULTS[name]
    if name in df.columns:
        col = df[name]
    else:
        col = pd.Series([default] * n, dtype=object if isinstance(default, str) else None)
    if _typed(col, name):
        return col  # plain string columns are kept as they are: nulls never match a test (no per-row scan here)
    if name in CATEGORY_COLUMNS:
        return col.fillna(default).astype(str).astype("category")
    col = pd.to_numeric(col, errors="coerce")
    if _NUMPY_TYPES[name] is not np.float64:
        col = col.fillna(default)
    return col.astype(_NUMPY_TYPES[name])


def _typed(col: pd.Series, name: str) -> bool:
    """Whether the column already has the event table's type for `name` (kept as it is)."""
    if name in CATEGORY_COLUMNS:
        return isinstance(col.dtype, pd.CategoricalDtype)
    return name not in _NUMPY_TYPES or col.dtype == _NUMPY_TYPES[name]


@functools.cache
def _empty_event_columns() -> dict[str, pd.Series]:
    return {name: _event_column(pd.DataFrame(), name, 0) for name in COLUMNS}


def category_mask(col: pd.Series, test: Callable[[pd.Series], object]) -> np.ndarray:
    """Row mask of a vectorized string test run once per distinct value, e.g.

        category_mask(ev["name"], lambda names: names.str.startswith("ProfilerStep#"))

    `test` gets the distinct strings as an object Series; its verdicts reach the rows through
    the category codes (a missing value never matches). Time and memory follow the number of
    distinct names, not rows x the longest name (what `col.astype(str).str...` costs: a
    fixed-width copy of every row). A column that is not categorical is factorized first."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, values = col.cat.codes.to_numpy(), col.cat.categories
    else:
        codes, values = pd.factorize(col.to_numpy(dtype=object), use_na_sentinel=True)
    strings = pd.Series(np.asarray(values, dtype=object), dtype=object).map(str)
    verdict = np.asarray(test(strings), dtype=bool) if len(strings) else np.zeros(0, dtype=bool)
    return np.append(verdict, False)[codes]


def text_values(col: pd.Series) -> np.ndarray:
    """The column's values as an object array of str ("" for missing), sharing one str per
    distinct value: what `col.astype(str)` was used for, without a fixed-width copy."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        values = np.append(np.asarray(col.cat.categories, dtype=object), "")
        values = np.asarray([v if isinstance(v, str) else str(v) for v in values], dtype=object)
        return values[col.cat.codes.to_numpy()]
    return np.asarray([v if isinstance(v, str) else str(v) for v in col.to_numpy(dtype=object, na_value="")],
                      dtype=object)


def distinct_text(col: pd.Series) -> list[str]:
    """The distinct values present in the column, as str (categories not used are left out)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        return [str(col.cat.categories[c]) for c in np.unique(codes[codes >= 0])]
    return [str(v) for v in pd.unique(col.dropna().to_numpy())]


def in_values(column: pd.Series | pd.Categorical, values) -> np.ndarray:
    """`column.isin(values)` as a numpy mask. A categorical column is looked up once per
    category, then by code: pandas' isin hashes every row's code (~2 ms on 400k rows, a
    dozen features each do one)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        cat = column.cat if isinstance(column, pd.Series) else column
        return _per_code(cat.categories, values)[np.asarray(cat.codes)]
    return np.asarray(column.isin(list(values)))


def _per_code(categories: pd.Index, values) -> np.ndarray:
    """Whether each category is one of `values`, indexed by code; the last entry is code -1
    (a missing value), which matches nothing."""
    return np.append(categories.isin(list(values)), False)


def parse_attrs(text: str) -> dict:
    """One row's `attrs` JSON as a dict ({} when it is not a JSON object)."""
    try:
        value = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


class EventIndex:
    """Row numbers of the events by kind, and name lookups over the category codes: built
    lazily, once per trace, and shared by every feature (a feature whose kinds are absent
    learns it without a scan; one that needs a kind reads its rows, not a masked copy of
    every column)."""

    def __init__(self, events: pd.DataFrame):
        self._events = events
        self._kinds = events["kind"]
        self._rows: dict[str, np.ndarray] = {}

    def rows(self, *kinds: str) -> np.ndarray:
        """Sorted row numbers of the events of these kinds (empty when none is present)."""
        parts = [self._rows_of(k) for k in kinds]
        parts = [p for p in parts if len(p)]
        if len(parts) <= 1:
            return parts[0] if parts else np.empty(0, dtype=np.int64)
        return np.sort(np.concatenate(parts))

    def _rows_of(self, kind: str) -> np.ndarray:
        found = self._rows.get(kind)
        if found is None:
            code = self._kinds.cat.categories.get_indexer([kind])[0]
            found = (np.flatnonzero(self._kinds.cat.codes.to_numpy() == code) if code >= 0
                     else np.empty(0, dtype=np.int64))
            self._rows[kind] = found
        return found

    def has(self, *kinds: str) -> bool:
        return any(len(self._rows_of(k)) for k in kinds)

    def name_in(self, rows: np.ndarray, names) -> np.ndarray:
        """Mask over `rows`: the event's name is one of `names` (a lookup per category)."""
        col = self._events["name"]
        return _per_code(col.cat.categories, names)[col.cat.codes.to_numpy()[rows]]

    def codes(self, name: str, rows: np.ndarray) -> np.ndarray:
        """A category column's codes at `rows` (-1: missing)."""
        return self._events[name].cat.codes.to_numpy()[rows]

    def column(self, name: str, rows: np.ndarray) -> np.ndarray:
        """One numeric column at `rows` (the column itself is not copied)."""
        return self._events[name].to_numpy()[rows]


class TraceFrame:
    """One trace's events, normalized once with `as_event_frame`; `span` is (first ts, last
    end) in ns and `index` finds rows by kind (built on first use)."""

    def __init__(self, events: pd.DataFrame):
        self.events = as_event_frame(events)
        self._index: EventIndex | None = None
        ev = self.events
        if len(ev):
            self.span = (int(ev["ts"].min()), int((ev["ts"] + ev["dur"]).max()))
        else:
            self.span = (0, 0)

    @property
    def index(self) -> EventIndex:
        if self._index is None:
            self._index = EventIndex(self.events)
        return self._index
