"""Which rows of a table a field test, a selection and a condition match.

Rows are sorted arrays of row numbers (`Rows`), and `None` stands for every row of the
table, so a test that narrows an already small set never touches the rest of the table:

  * categorical columns are tested once per category (`FieldTest.mask_categories`); over the
    whole table the matching categories' rows come from per-category row lists kept for the
    next rule, and a test whose categories are absent from the trace costs nothing more;
  * numeric and string columns are tested vectorised over the rows still in play;
  * attrs tests run last, only on the rows that survived the cheaper tests of their selection.

One `TraceMasks` serves every rule of one evaluation: tests shared by rules (`kind: kernel`)
are computed once per table.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from rules.engine.attrs import AttrReader
from rules.engine.budget import Budget
from rules.engine.compiler import Selection
from rules.engine.errors import EvalError
from rules.engine.expressions import And, Condition, Not, Or, Quantified, SelectionRef
from rules.engine.features import TraceContext
from rules.engine.modifiers import FieldTest, json_text

Rows = np.ndarray            # sorted, unique int64 row numbers
ALL = None                   # every row of the table
_EMPTY = np.zeros(0, dtype=np.int64)
# a category set larger than this share of the table is gathered by one pass over the codes
_SCAN_SHARE = 8


class CategoryIndex:
    """The rows of each category of a categorical column that a test asked for (one
    comparison of the codes per category, kept): `kind: kernel` in twenty rules is one pass,
    and a value that is not among the column's categories costs no pass at all."""

    MAX_CATEGORIES = 4     # a test matching more categories than this gathers through the codes once

    def __init__(self, codes: np.ndarray):
        self.codes = codes
        self._rows: dict[int, Rows] = {}

    def rows(self, lookup: np.ndarray) -> Rows:
        """Rows whose category the lookup accepts (a verdict per category, then missing)."""
        wanted = np.flatnonzero(lookup[:-1])
        if not len(wanted):
            return _EMPTY
        if len(wanted) > self.MAX_CATEGORIES:
            return np.flatnonzero(lookup[self.codes])
        parts = [self._category(int(c)) for c in wanted]
        # each part is sorted: the stable sort merges the runs
        return np.sort(np.concatenate(parts), kind="stable") if len(parts) > 1 else parts[0]

    def _category(self, code: int) -> Rows:
        rows = self._rows.get(code)
        if rows is None:
            rows = self._rows[code] = np.flatnonzero(self.codes == code)
        return rows


class TableMasks:
    """Rows matched by tests, selections and conditions over one table; results of tests
    over the whole table are kept for the next rule."""

    def __init__(self, table: pd.DataFrame, attrs: AttrReader | None = None):
        self.table, self.n = table, len(table)
        self.attrs = attrs or AttrReader(table)
        self._lookups: dict[FieldTest, np.ndarray] = {}
        self._whole: dict[FieldTest, Rows] = {}
        self._indexes: dict[str, CategoryIndex] = {}

    # ------------------------------------------------------------ conditions and selections

    def condition(self, node: Condition, selections: dict[str, Selection], domain: Rows | None,
                  budget: Budget) -> Rows:
        if isinstance(node, SelectionRef):
            return self.selection(selections[node.name], domain, budget)
        if isinstance(node, Not):
            return self.difference(domain, self.condition(node.operand, selections, domain, budget))
        if isinstance(node, And):
            rows = domain
            for term in node.terms:
                rows = self.condition(term, selections, rows, budget)
                if not len(rows):
                    break
            assert rows is not None  # an And has terms
            return rows
        if isinstance(node, Or):
            return self._any([lambda d, t=t: self.condition(t, selections, d, budget) for t in node.terms], domain)
        return self._quantified(node, selections, domain, budget)

    def _quantified(self, node: Quantified, selections, domain: Rows | None, budget: Budget) -> Rows:
        if node.quantity == "all":
            return self.condition(And(tuple(SelectionRef(n) for n in node.names)), selections, domain, budget)
        if node.quantity <= 0:
            return self.every(domain)
        hits = [self.selection(selections[n], domain, budget) for n in node.names]
        rows, counts = np.unique(np.concatenate(hits), return_counts=True)
        return rows[counts >= node.quantity]

    def selection(self, sel: Selection, domain: Rows | None, budget: Budget) -> Rows:
        return self._any([lambda d, alt=alt: self._all_of(alt, d, budget) for alt in sel.alternatives], domain)

    def _all_of(self, tests: tuple[FieldTest, ...], domain: Rows | None, budget: Budget) -> Rows:
        rows = domain
        for test in tests:
            rows = self.test(test, rows)
            budget.check(f"testing {test.key}")
            if not len(rows):
                break
        return self.every(rows)

    def _any(self, terms, domain: Rows | None) -> Rows:
        """Union of terms; over an explicit domain each term sees only the rows the earlier
        ones left (fewer attrs reads), over the whole table each sees every row."""
        found, rest = [], domain
        for term in terms:
            if rest is not ALL and not len(rest):
                break
            hit = term(rest)
            found.append(hit)
            if rest is not ALL:
                rest = self.difference(rest, hit)
        return self.union(found)

    # ------------------------------------------------------------ one test

    def test(self, test: FieldTest, domain: Rows | None) -> Rows:
        """The rows of `domain` (ALL: the table) the test matches."""
        if domain is not ALL and not len(domain):
            return _EMPTY
        if test.attr_path is not None:
            rows = self.every(domain)
            return rows[test.mask_values(self.attrs.values(rows, test.attr_path))]
        if test.field not in self.table.columns:
            if not self.n:
                return _EMPTY
            raise EvalError(f"{test.key}: the table has no column {test.field!r} "
                            f"(columns: {', '.join(map(str, self.table.columns))})")
        if domain is ALL:
            if test not in self._whole:
                self._whole[test] = self._whole_table(test)
            return self._whole[test]
        col = self.table[test.field]
        if isinstance(col.dtype, pd.CategoricalDtype):
            return domain[self._lookup(test, col)[col.cat.codes.to_numpy()[domain]]]
        if col.dtype.kind in "fiub":
            return domain[test.mask_number_column(col.to_numpy()[domain])]
        return domain[test.mask_strings(_strings(col, domain))]

    def _whole_table(self, test: FieldTest) -> Rows:
        col = self.table[test.field]
        if isinstance(col.dtype, pd.CategoricalDtype):
            lookup = self._lookup(test, col)
            index = self._indexes.get(test.field)
            if index is None:
                index = self._indexes[test.field] = CategoryIndex(col.cat.codes.to_numpy())
            return index.rows(lookup)
        if col.dtype.kind in "fiub":
            return np.flatnonzero(test.mask_number_column(col.to_numpy()))
        return np.flatnonzero(test.mask_strings(_strings(col, ALL)))

    def _lookup(self, test: FieldTest, col: pd.Series) -> np.ndarray:
        """The test's verdict per category, then False for a missing value (code -1)."""
        lookup = self._lookups.get(test)
        if lookup is None:
            lookup = self._lookups[test] = np.append(test.mask_categories(col.cat.categories), False)
        return lookup

    # ------------------------------------------------------------ row sets

    def every(self, rows: Rows | None) -> Rows:
        return np.arange(self.n, dtype=np.int64) if rows is ALL else rows

    def union(self, parts: list[Rows]) -> Rows:
        parts = [p for p in parts if len(p)]
        if not parts:
            return _EMPTY
        if len(parts) == 1:
            return parts[0]
        if sum(map(len, parts)) * _SCAN_SHARE > self.n:
            mask = np.zeros(self.n, dtype=bool)
            for p in parts:
                mask[p] = True
            return np.flatnonzero(mask)
        return np.unique(np.concatenate(parts))

    def difference(self, domain: Rows | None, hit: Rows) -> Rows:
        """Rows of the domain not in `hit` (a subset of it)."""
        if domain is ALL:
            keep = np.ones(self.n, dtype=bool)
            keep[hit] = False
            return np.flatnonzero(keep)
        keep = np.ones(len(domain), dtype=bool)
        keep[np.searchsorted(domain, hit)] = False
        return domain[keep]


def by_time(table: pd.DataFrame, rows: Rows) -> np.ndarray:
    """Rows (sorted by number) ordered by their start time, ties in row order."""
    ts = table["ts"].to_numpy()[rows]
    if len(ts) > 1 and not (np.diff(ts) >= 0).all():
        rows = rows[np.argsort(ts, kind="stable")]
    return rows


def _strings(col: pd.Series, rows: Rows | None) -> pa.Array | pa.ChunkedArray:
    """A string column (at rows) as Arrow: zero-copy when it is Arrow-backed (the event
    frame's attrs, loc and ids), else converted from the Python objects."""
    if isinstance(col.dtype, pd.ArrowDtype) and pa.types.is_string(col.dtype.pyarrow_dtype):
        arr = col.array.__arrow_array__()
        return arr if rows is ALL else arr.take(pa.array(rows))
    values = col.to_numpy()
    return _arrow_strings(values if rows is ALL else values[rows])


def _arrow_strings(values: np.ndarray) -> pa.Array:
    try:
        return pa.array(values, type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else json_text(v) for v in values], type=pa.string())


class TraceMasks:
    """The TableMasks of each table of one trace (the events, each feature), made on first
    use and shared by every rule of one evaluation, with one attrs reader per table."""

    def __init__(self, ctx: TraceContext):
        self.ctx = ctx
        self._tables: dict[str | None, TableMasks] = {}

    def of(self, source: str | None) -> TableMasks:
        masks = self._tables.get(source)
        if masks is None:
            masks = self._tables[source] = TableMasks(self.ctx.table(source))
        return masks
