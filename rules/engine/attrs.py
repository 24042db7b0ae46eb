"""Reading values out of a table: attrs JSON paths of chosen rows, columns at rows, one row's field.

attrs JSON is parsed per row, only for the rows asked for, and kept (bounded) so that the
tests, group keys and evidence of one trace parse each row once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson
import pandas as pd

from rules.engine.errors import EvalError


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


def attr_path(field: str) -> tuple[str, ...] | None:
    return tuple(field.split(".")[1:]) if field.startswith("attrs.") else None


def field_values(table: pd.DataFrame, attrs: AttrReader, field: str, rows: np.ndarray) -> np.ndarray:
    """Values of a field (column, feature column or attrs.<path>) at rows, as a numpy array."""
    path = attr_path(field)
    if path is not None:
        return np.asarray(attrs.values(rows, path) + [None], dtype=object)[:-1]
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
    path = attr_path(field)
    if path is not None:
        return attrs.value(row, path)
    if field not in table.columns:
        return None
    return plain(table[field].iat[row])


def plain(v):
    """A numpy scalar as its Python value; NaN as None."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and v != v:
        return None
    return v


@dataclass(frozen=True)
class TableReader:
    """One table and the attrs reader every job over it shares."""
    table: pd.DataFrame
    attrs: AttrReader

    @classmethod
    def of(cls, table: pd.DataFrame) -> "TableReader":
        return cls(table, AttrReader(table))


@dataclass
class RowRef:
    """One row of one table: what a finding's evidence and its {first.x} placeholders read."""
    table: pd.DataFrame
    attrs: AttrReader
    row: int

    def get(self, field: str):
        return row_value(self.table, self.attrs, self.row, field)
