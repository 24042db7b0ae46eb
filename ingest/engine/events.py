"""The normalized event table: one schema for every source (docs/rules.md "Events and fields").

Parsers never build DataFrames row by row: they hand rows (or whole columns) to an
`EventSink`, which buffers them column-wise and cuts Arrow record batches of bounded
size, so memory stays flat however large the input is.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, overload

import numpy as np
import orjson
import pyarrow as pa

from ingest.engine.clock import Clock

KINDS = (
    "kernel", "memcpy", "memset", "runtime", "driver", "cpu_op", "annotation", "collective",
    "graph", "alloc", "free", "oom", "sample", "span", "log", "error", "sync", "marker",
)
SOURCES = (
    "kineto", "nsys", "ncu", "nvml", "nvidia_smi", "dcgm", "otlp", "perf", "log",
    "flight_recorder", "memory_snapshot", "token_latency",
)
SEVERITIES = ("debug", "info", "warning", "error", "critical")

_dict = pa.dictionary(pa.int32(), pa.string())
SCHEMA = pa.schema([
    ("ts", pa.int64()),
    ("dur", pa.int64()),
    ("kind", _dict),
    ("name", _dict),
    ("source", _dict),
    ("artifact", _dict),
    ("host", _dict),
    ("pid", pa.int64()),
    ("tid", pa.int64()),
    ("device", pa.int32()),
    ("stream", pa.int64()),
    ("corr", pa.int64()),
    ("trace_id", pa.string()),
    ("span_id", pa.string()),
    ("parent_id", pa.string()),
    ("value", pa.float64()),
    ("unit", _dict),
    ("severity", _dict),
    ("attrs", pa.string()),
    ("loc", pa.string()),
])
COLUMNS = tuple(SCHEMA.names)
CATEGORY_COLUMNS = tuple(f.name for f in SCHEMA if pa.types.is_dictionary(f.type))

# Default for a column a row does not set.
DEFAULTS: dict[str, Any] = {
    "ts": 0, "dur": 0, "kind": "marker", "name": "", "source": "", "artifact": "", "host": "",
    "pid": -1, "tid": -1, "device": -1, "stream": -1, "corr": -1, "trace_id": "", "span_id": "",
    "parent_id": "", "value": float("nan"), "unit": "", "severity": "", "attrs": "{}", "loc": "",
}

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


@overload
def clamp_int(value: Any, default: int = -1) -> int: ...
@overload
def clamp_int(value: Any, default: None) -> int | None: ...
def clamp_int(value: Any, default: int | None = -1) -> int | None:
    """Integers from untrusted files may exceed int64: keep them out of int columns."""
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return v if INT64_MIN <= v <= INT64_MAX else default


def dumps_attrs(attrs: dict | None) -> str:
    if not attrs:
        return "{}"
    # OPT_PASSTHROUGH_BIGINT is not a thing; big ints are stringified by `default`.
    return orjson.dumps(attrs, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


class ParseError(Exception):
    """Unusable input. The message names the file, where (line, byte offset, row, table),
    what was expected and, for a refusal of the input, what was got instead, so a person can
    act on it: '<file>: <where>: expected <what>; got <excerpt or finding>'. Without `got`
    (not a refusal of the input: an internal error, out of memory) the old shape stays."""

    def __init__(self, path: str, where: str, expected: str, got: str | None = None):
        self.path, self.where, self.expected, self.got = str(path), where, expected, got
        what = expected
        if got is not None:
            bare = expected.removeprefix("expected ")
            what = f"expected {bare}; got {got[:MAX_GOT]}"
        super().__init__(f"{self.path}: {where}: {what}" if where else f"{self.path}: {what}")


MAX_GOT = 200  # a refusal's 'got' is an excerpt or a finding, never the whole input


def excerpt(data: bytes | str, limit: int = 40) -> str:
    """A short repr of the start of `data` for a refusal's 'got': bounded by `limit`
    whatever the input's length (only the slice is copied)."""
    head = data[:limit]
    more = "..." if len(data) > limit else ""
    return f"{head!r}{more}" if head else "nothing (empty)"


def json_error_got(data: bytes | str, pos: int, msg: str) -> str:
    """A refusal's 'got' for a JSON syntax error at `pos`: the text there (bounded) and the
    decoder's reason, or the end of the data when the text stops short."""
    if pos >= len(data):
        return f"the end of the data ({msg})"
    return f"{excerpt(data[pos:pos + 21], 20)} ({msg})"


def describe(value: Any) -> str:
    """What a decoded document or field is, for a refusal's 'got': its kind and a bounded
    excerpt (a few keys of an object, the length of a list), never the whole value."""
    if isinstance(value, dict):
        keys = ", ".join(excerpt(str(k), 30) for k in list(value)[:5])
        return f"an object with keys {keys}{', ...' if len(value) > 5 else ''}" if value else "an empty object"
    if isinstance(value, list):
        return f"a list of {len(value):,} items" if value else "an empty list"
    if isinstance(value, (str, bytes)):
        return f"a string {excerpt(value)}"
    if value is None:
        return "null"
    return f"{type(value).__name__} {excerpt(repr(value))}"


@dataclass
class ParseReport:
    """What one parser said about one artifact, shown in the report."""
    format: str = ""
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # record type -> count not understood
    meta: dict[str, Any] = field(default_factory=dict)  # clock, rank, devices, versions ...

    MAX_WARNINGS = 50

    def warn(self, message: str) -> None:
        if len(self.warnings) < self.MAX_WARNINGS:
            self.warnings.append(message)
        elif len(self.warnings) == self.MAX_WARNINGS:
            self.warnings.append("further warnings suppressed")

    def set_clock(self, clock: Clock) -> None:
        """State the clock this artifact's timestamps are on (read back by ingest.engine.align)."""
        self.meta["clock"] = clock.to_meta()

    def summary_warnings(self) -> list[str]:
        extra = [f"{n:,} records of type {t!r} not understood (kept as markers or skipped)"
                 for t, n in self.skipped.most_common()]
        return self.warnings + extra


class EventLimitReached(Exception):
    """The sink holds `limit` events and was handed another: the parse stops there (the caller,
    ingest.engine.parse, keeps the events so far and says in the report that the rest was not read)."""

    def __init__(self, limit: int, after: str, setting: str = ""):
        self.limit, self.after, self.setting = limit, after, setting
        super().__init__(f"at most {limit:,} events (after {after or 'the start'})")


class EventSink:
    """Buffers rows column-wise and hands full Arrow batches to `on_batch`; past `limit` events
    (None: no bound) it raises EventLimitReached instead of taking more."""

    def __init__(self, artifact: str, source: str, on_batch: Callable[[pa.RecordBatch], None],
                 batch_rows: int = 262_144, limit: int | None = None, limit_setting: str = ""):
        self.artifact, self.source = artifact, source
        self.on_batch, self.batch_rows = on_batch, batch_rows
        self.limit, self.limit_setting = limit, limit_setting
        self.count = 0
        self.last_loc = ""
        self._cols: dict[str, list] = {c: [] for c in COLUMNS}

    def emit(self, **row: Any) -> None:
        """One event. Unset columns take DEFAULTS; `attrs` may be a dict."""
        if self.limit is not None and self.count >= self.limit:
            raise EventLimitReached(self.limit, self._cols["loc"][-1] if self._cols["loc"] else self.last_loc,
                                    self.limit_setting)
        row.setdefault("artifact", self.artifact)
        row.setdefault("source", self.source)
        attrs = row.get("attrs")
        if isinstance(attrs, dict):
            row["attrs"] = dumps_attrs(attrs)
        cols = self._cols
        for c in COLUMNS:
            cols[c].append(row.get(c, DEFAULTS[c]))
        self.count += 1
        if len(cols["ts"]) >= self.batch_rows:
            self.flush()

    def emit_columns(self, columns: Mapping[str, Iterable | pa.Array]) -> None:
        """Many events at once (fast paths): missing columns take DEFAULTS. Past the limit, the
        rows up to it are kept and EventLimitReached is raised."""
        self.flush()
        batch = make_batch(columns, artifact=self.artifact, source=self.source)
        # the limit, where this batch goes past it
        reached = self.limit if self.limit is not None and self.count + batch.num_rows > self.limit else None
        if reached is not None:
            batch = batch.slice(0, max(0, reached - self.count))
        self.count += batch.num_rows
        if batch.num_rows:
            self.last_loc = str(batch.column(COLUMNS.index("loc"))[-1].as_py() or "")
            self.on_batch(batch)
        if reached is not None:
            raise EventLimitReached(reached, self.last_loc, self.limit_setting)

    def flush(self) -> None:
        if not self._cols["ts"]:
            return
        batch = make_batch(self._cols)
        self.last_loc = str(self._cols["loc"][-1])
        self._cols = {c: [] for c in COLUMNS}
        self.on_batch(batch)


def make_batch(columns: Mapping[str, Any], **constants: Any) -> pa.RecordBatch:
    """Build a batch in SCHEMA from column lists/arrays; `constants` fill whole columns."""
    n = None
    for v in columns.values():
        n = len(v)
        break
    n = n or 0
    arrays = []
    for f in SCHEMA:
        if f.name in columns and len(columns[f.name]) == n:
            data = columns[f.name]
        else:
            value = constants.get(f.name, DEFAULTS[f.name])
            arr = _constant(f, value, n)
            if arr is not None:
                arrays.append(arr)
                continue
            data = [value] * n
        if pa.types.is_dictionary(f.type):
            arr = data if isinstance(data, pa.Array) else pa.array(data, type=pa.string())
            if not pa.types.is_dictionary(arr.type):
                arr = arr.cast(pa.string()).dictionary_encode()
            arr = arr.cast(f.type)
        else:
            arr = data if isinstance(data, pa.Array) else pa.array(data, type=f.type, from_pandas=True)
            if arr.type != f.type:
                arr = arr.cast(f.type)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def _constant(f: pa.Field, value: Any, n: int) -> pa.Array | None:
    """A whole column of one value, built without a Python list of n items; None where the
    general path must decide (no rows, or a value of an unexpected type)."""
    if not n:
        return None
    if pa.types.is_dictionary(f.type):
        if type(value) is not str:
            return None
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))
    if f.type == pa.float64() and isinstance(value, float) and value != value:
        return pa.nulls(n, pa.float64())  # NaN is a null here, as from_pandas makes it
    if (f.type == pa.string() and type(value) is str) or (pa.types.is_integer(f.type) and type(value) is int):
        return pa.repeat(pa.scalar(value, f.type), n)
    return None


def empty_table() -> pa.Table:
    return SCHEMA.empty_table()
