"""Kineto / PyTorch profiler traces (`*.pt.trace.json[.gz]`, Chrome trace JSON).

Clock. libkineto writes every `ts` as microseconds relative to `baseTimeNanoseconds`
(`transToRelativeTime(t) = t - ChromeTraceBaseTime::singleton().get()` in
libkineto/src/output_json.cpp; the base is the wall clock floored to a quarter), so the
wall-clock time is `baseTimeNanoseconds + ts * 1000`. Traces from before that field
(PyTorch < 2.1) carry absolute Unix microseconds in `ts`. Anything else (hand-made or
synthetic traces) is a relative clock, said so in report.meta["clock"].

One streaming pass (see kineto.decode) builds the table columns window by window and
hands them to the sink; the document is never held whole. A GPU-side row takes its host
pid/tid from its launching runtime call through the correlation id: a compact map of the
launches seen so far fills it at once, and only the rows whose launch comes later in the
file (a kernel often comes before its launch) wait, as Arrow columns, until the end.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Sequence

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import re2  # linear time: sniff runs on every uploaded file

from ingest.engine.clock import Clock
from ingest.engine.events import INT64_MAX, INT64_MIN, EventSink, ParseReport, dumps_attrs
from ingest.engine.io import is_gzip, open_bytes
from ingest.engine.row_copy import take_texts
from ingest.engine.parsers.kineto.decode import (
    MAX_TOP_BYTES, Args, Chunk, Event, TraceReader, decode_args, events_key_at_top, has_big_int, peek_trailer,
)
from ingest.engine.parsers.kineto.scan import INT, NULL, Texts, ints
from ingest.engine.parsers.kineto.kinds import (
    CATEGORY_KIND, DEVICE_KINDS, FLOW_PHASES, NCCL_KERNEL_PREFIXES,
    PARAM_COMMS_OP, collective_attrs, load_args, memcpy_attrs, step_attrs, stringify_big_ints,
)

FORMAT = "kineto"
SOURCE = "kineto"

_KINETO_KEYS = (b'"schemaVersion"', b'"deviceProperties"', b'"baseTimeNanoseconds"',
                b'"distributedInfo"', b'"cupti_version"', b'"cuda_runtime_version"',
                b'"computeProperties"', b'"cat": "cpu_op"', b'"cat": "kernel"',
                b'"cat": "Operator"', b'"cat": "Kernel"')
# ts*1000 above this is already an absolute Unix time in ns (after 2001-09-09)
UNIX_NS_FLOOR = 10**18
MEMORY_EVENT = "[memory]"
OOM_EVENT = "[OutOfMemory]"  # the caching allocator's failed request (args.Bytes)
KINETO_MARKER_NAMES = ("Iteration Start", "Record Window End")
MAX_META_VALUE = 16_384  # bytes of one top-level value kept in report.meta
# Windows read and scanned ahead of the one being built (each ~2x WINDOW_BYTES with the
# scanner's texts): one, and READ_BURST while the first is being built. In the CLI, pandas and
# the rules import meanwhile (a third of a second, holding the GIL): no row is built, but the
# scanner runs outside the GIL, and windows scanned then are not scanned later. The table is
# small then, but pandas loads: 3 windows (5 gave the same time since window buffers are
# reused, and 5 MiB more peak on a 150 MB trace; each window more ahead at the end of the
# parse, with the table whole, is ~18 MiB more at the peak). A parse that builds its first
# window at once (a worker) takes its second soon: the burst ends there.
READ_AHEAD, READ_BURST = 1, 3


# The trace-event format's JSON Array Format: the document is the event array itself (early
# torch.autograd.profiler export_chrome_trace, chrome://tracing captures). Its first event
# carries a one-letter phase; an array of other objects does not.
_ARRAY_OF_EVENTS = re2.compile(rb'^\s*\[\s*\{')
_PHASE_KEY = re2.compile(rb'"ph"\s*:\s*"[A-Za-z]"')
_EVENT_KEYS = (b'"ts"', b'"pid"', b'"name"')


def sniff(head: bytes, name: str) -> bool:
    start = head.lstrip()[:1]
    if start == b"[":
        first = head[:4096]
        return bool(_ARRAY_OF_EVENTS.match(first) and _PHASE_KEY.search(first)) \
            and sum(k in first for k in _EVENT_KEYS) >= 2
    return start == b"{" and b'"traceEvents"' in head and any(k in head for k in _KINETO_KEYS)


LOOK_PAST_EVENTS_KEY = 64 << 10  # bytes of events read past `"traceEvents": [` for a Kineto key


def sniff_past_head(path: Path) -> bool:
    """A trace object whose leading top-level keys (a big `metadata` a job adds, many devices'
    properties) outgrow the detection head: read on, as the parser itself does (up to
    MAX_TOP_BYTES), until `traceEvents` opens at the top level, and look for Kineto's keys
    in what precedes it and in the first events. Detection calls this only for a JSON object
    no parser took from its head."""
    data = bytearray()
    searched = 0
    with open_bytes(path) as f:
        while searched <= MAX_TOP_BYTES:
            block = f.read(1 << 20)
            data += block
            end = events_key_at_top(data, max(0, searched - 64))
            if end is not None:
                data += f.read(max(0, end + LOOK_PAST_EVENTS_KEY - len(data)))
                window = bytes(data[:end + LOOK_PAST_EVENTS_KEY])
                return any(k in window for k in _KINETO_KEYS)
            searched = len(data)
            if not block:
                return False
    return False


class _LaunchMap:
    """Correlation id -> pid/tid of the runtime/driver call with that id (the first one
    in the file wins), as sorted numpy arrays: no Python object per launch."""

    def __init__(self):
        self.corr = self.pid = self.tid = np.empty(0, np.int64)

    def add(self, corr: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> None:
        corr, first = np.unique(corr, return_index=True)
        new = ~self.find(corr)[1]
        merged = np.concatenate([self.corr, corr[new]])
        order = np.argsort(merged, kind="stable")  # two sorted runs: a linear merge
        self.corr = merged[order]
        self.pid = np.concatenate([self.pid, pid[first][new]])[order]
        self.tid = np.concatenate([self.tid, tid[first][new]])[order]

    def find(self, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in the map, found) per correlation id."""
        if not len(self.corr):
            return np.zeros(len(corr), np.int64), np.zeros(len(corr), bool)
        pos = np.minimum(np.searchsorted(self.corr, corr), len(self.corr) - 1)
        return pos, (self.corr[pos] == corr) & (corr >= 0)


class _Context:
    """What every chunk needs: clock, rank, the launch map, counters for the report."""

    def __init__(self, report: ParseReport, meta: dict[str, Any]):
        self.report, self.meta = report, meta
        self.rank, self.host = meta.get("rank"), str(meta.get("host_name") or "")
        self.offset_ns: int | None = None  # decided by the first timed events
        self.absolute_ts = False            # ... which carried Unix times (the base is ignored)
        self.collectives = 0                # rows whose attrs hold the rank
        self.launches = _LaunchMap()
        self.waiting: list[dict] = []   # GPU-side columns whose launch was not seen yet
        self.flows: Counter = Counter()
        self.metadata_events = 0
        self.clamped = 0
        self.big_int_attrs = 0
        self.open_ranges: dict[tuple, list[tuple[Event, int]]] = {}
        self.range_events = 0   # B/E events (their rows come after their window's others)
        self.counter_events = 0  # C events (their rows come before their window's others)


def _rows_off(final: dict[str, Any], ctx: _Context) -> list[str]:
    """What keys found after traceEvents would have changed in rows already built."""
    off = []
    if final.get("base_time_ns") != ctx.meta.get("base_time_ns") and not ctx.absolute_ts:
        off.append("clock")
    if final.get("rank") != ctx.meta.get("rank") and ctx.collectives:
        off.append("rank")
    if final.get("host_name") != ctx.meta.get("host_name"):
        off.append("host")
    return off


def parse(path: Path, sink: EventSink, report: ParseReport, order: dict | None = None) -> None:
    """`order` (ingest.engine.kineto_ranges) gets what a byte range's merge needs to put the rows in
    the order of the whole file's parse: where the waiting rows start, the B/E and C events."""
    reader = TraceReader(Path(path))
    chunks = reader.chunks(READ_AHEAD, READ_BURST)
    chunk = next(chunks, None)  # reads the header
    ahead = peek_trailer(reader.path) if not reader.bare and _trailer_may_matter(reader, chunk) else {}
    ctx = _Context(report, _read_meta(reader.header | ahead, report))
    while chunk is not None:
        _emit_chunk(chunk, ctx, sink)
        del chunk  # not kept alive while the next window decodes
        chunk = next(chunks, None)
    _close_open_ranges(ctx, sink)
    if order is not None:
        order.update(waiting_from=sink.count, range_events=ctx.range_events, counter_events=ctx.counter_events)
    _emit_waiting_rows(ctx, sink)
    if reader.trailer != ahead:  # the read-ahead missed (trailer over TAIL_BYTES): report the real one
        final = _read_meta(reader.header | reader.trailer, report)
        if off := _rows_off(final, ctx):
            report.warn(f"keys after traceEvents could not be read ahead: {', '.join(off)} of the "
                        "rows may be off")

    # in order: a scanned window that needs msgspec is typed in this thread, after windows the
    # read-ahead thread has typed already
    broken = sorted(reader.broken)
    for i, why in broken[:20]:
        report.warn(f"traceEvents[{i}]: skipped, not a valid event ({why})")
    if broken:
        report.skipped["broken event"] += len(broken)
    if ctx.clamped:
        report.warn(f"{ctx.clamped:,} integer value(s) outside int64 set to -1 in the table "
                    "(originals kept in attrs)")
    if ctx.big_int_attrs:
        report.warn(f"{ctx.big_int_attrs:,} integer(s) beyond int64 in event args kept as "
                    "strings in attrs")
    report.meta["flows"] = dict(ctx.flows)
    report.meta["flow_events"] = sum(ctx.flows.values())
    report.meta["metadata_events"] = ctx.metadata_events
    report.meta["trace_events"] = reader.count
    if reader.bare:  # no trace object: no clock base, devices or rank to read
        report.meta["layout"] = "event array (trace-event JSON Array Format)"
        report.meta["array_closed"] = reader.array_closed


def _trailer_may_matter(reader: TraceReader, first: Chunk | None) -> bool:
    """Whether the keys after traceEvents must be read before the first row is built.

    In a plain file that read is a seek; a gzip has to be decompressed twice for it (a
    third of the parse). The clock base is what libkineto writes there (ROCm builds):
    not needed when the header already has it or the first events carry absolute times
    (the base is then ignored). Rank and host come from the header in PyTorch's files; if
    a trailer still disagrees, the parse says so (see `parse`)."""
    if not is_gzip(reader.path):
        return True
    if "baseTimeNanoseconds" in reader.header:
        return False
    ts = first.first_times(1000) if first else []
    return not (ts and min(ts) * 1000 >= UNIX_NS_FLOOR)


# ---------------------------------------------------------------- metadata and clock

_META_NAMES = {
    "baseTimeNanoseconds": "base_time_ns", "deviceProperties": "devices",
    "computeProperties": "devices", "distributedInfo": "distributed_info",
    "cuda_driver_version": "cuda_driver_version", "cuda_runtime_version": "cuda_runtime_version",
    "cupti_version": "cupti_version", "displayTimeUnit": "display_time_unit",
    "traceName": "trace_name", "schemaVersion": "schema_version", "trace_id": "trace_id",
    "host_name": "host_name",
}


def _read_meta(top: dict[str, msgspec.Raw], report: ParseReport) -> dict[str, Any]:
    """Top-level keys (raw JSON values) -> report.meta; returns the known ones."""
    meta: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for key, raw in top.items():
        if len(raw) > MAX_META_VALUE and key not in _META_NAMES:
            other[key] = f"<{len(raw):,} bytes not kept>"
            continue
        try:
            value, _ = stringify_big_ints(msgspec.json.decode(raw))
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        if key in _META_NAMES:
            meta[_META_NAMES[key]] = value
        else:
            other[key] = value
    info = meta.get("distributed_info")
    if isinstance(info, dict):
        for key in ("rank", "world_size"):
            if isinstance(info.get(key), int):
                meta[key] = info[key]
        if "backend" in info:
            meta["dist_backend"] = info["backend"]
    if other:
        meta["other"] = other
    report.meta.update(meta)
    return meta


def _clock(meta: dict[str, Any], ts_min: float, report: ParseReport) -> int:
    """Offset in ns to add to ts*1000; sets report.meta['clock']."""
    base = meta.get("base_time_ns")
    already_absolute = np.isfinite(ts_min) and ts_min * 1000 >= UNIX_NS_FLOOR
    if isinstance(base, int) and base >= UNIX_NS_FLOOR and not already_absolute:
        report.set_clock(Clock("unix", source="baseTimeNanoseconds + ts"))
        return base
    if already_absolute:
        report.set_clock(Clock("unix", source="ts (absolute Unix microseconds)"))
        if isinstance(base, int):
            report.warn("baseTimeNanoseconds ignored: ts values are already absolute")
        return 0
    report.set_clock(Clock("relative", note="no baseTimeNanoseconds and ts is not a Unix time: "
                                            "times are microseconds from an unknown origin"))
    return 0


# ---------------------------------------------------------------- column helpers

def _int_or_clamp(v: Any) -> int:
    if isinstance(v, float) and v.is_integer() and INT64_MIN <= v <= INT64_MAX:
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        n = int(v)
        return n if INT64_MIN <= n <= INT64_MAX else -2
    if isinstance(v, int) and not isinstance(v, bool):
        return -2  # out of int64 range
    return -1


def _ints(values: Sequence) -> tuple[np.ndarray, int]:
    """int64 column; None/str/odd -> -1; out-of-range ints -> -1 and counted."""
    try:
        arr = pa.array(values)
    except (pa.ArrowException, OverflowError):
        arr = None
    if arr is not None and arr.type in (pa.int64(), pa.null()):  # ints and None: one C loop
        return arr.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False, writable=True), 0
    # a few odd values (a pid "Spans"): the ints still in one C loop, the odd ones one by one
    try:
        arr = pa.array([v if type(v) is int else None for v in values], pa.int64())
    except (pa.ArrowException, OverflowError):  # ints beyond int64
        return _ints_one_by_one(values)
    out = arr.fill_null(-1).to_numpy(zero_copy_only=False, writable=True)
    clamped = 0
    for i in np.flatnonzero(out == -1).tolist():
        v = values[i]
        if v is not None and type(v) is not int:
            n = _int_or_clamp(v)
            clamped += n == -2
            out[i] = -1 if n == -2 else n
    return out, clamped


def _int_field(t: Texts) -> tuple[np.ndarray, int]:
    """`_ints` of a scanned field's values: the integer texts cast in one call, only the
    others (a pid "Spans") decoded one by one."""
    out = np.full(len(t.tags), -1, np.int64)
    is_int = t.tags == INT
    fast = ints(t, np.flatnonzero(is_int)) if is_int.any() else None
    if fast is not None:
        out[is_int] = fast
    else:
        is_int[:] = False  # some beyond int64: every value one by one (counted as clamped)
    odd = (t.tags > NULL) & ~is_int
    if not odd.any():
        return out, 0
    out[odd], clamped = _ints(Texts(t.tags[odd], t.texts.filter(pa.array(odd))).values())
    return out, clamped


def _ints_one_by_one(values: Sequence) -> tuple[np.ndarray, int]:
    out = np.fromiter(
        (-1 if v is None else v if type(v) is int and INT64_MIN <= v <= INT64_MAX
         else _int_or_clamp(v) for v in values), dtype=np.int64, count=len(values))
    clamped = out == -2
    n = int(clamped.sum())
    if n:
        out[clamped] = -1
    return out, n


def _ns(ts_us: np.ndarray, offset_ns: int) -> np.ndarray:
    """Microsecond floats -> int64 ns, keeping the fraction exact where the float has it."""
    whole = np.floor(ts_us)
    frac_ns = np.rint((ts_us - whole) * 1000).astype(np.int64)
    return whole.astype(np.int64) * 1000 + frac_ns + offset_ns


class _Strings:
    """A string column as dictionary codes, values in order of first appearance (as
    pyarrow's dictionary_encode gives them): each test runs once per distinct value."""

    def __init__(self, values: list[str], codes: np.ndarray, array: pa.DictionaryArray | None = None):
        self.values, self.codes, self._array = values, codes, array

    @classmethod
    def of(cls, items: Sequence[str] | pa.StringArray) -> "_Strings":
        array = (items if isinstance(items, pa.Array) else pa.array(items, pa.string())).dictionary_encode()
        return cls(array.dictionary.to_pylist(), array.indices.to_numpy(), array)

    @property
    def array(self) -> pa.DictionaryArray:
        if self._array is None:
            self._array = pa.DictionaryArray.from_arrays(pa.array(self.codes, pa.int32()),
                                                         pa.array(self.values, pa.string()))
        return self._array

    def where(self, test: Callable[[str], bool]) -> np.ndarray:
        hit = np.fromiter((test(v) for v in self.values), dtype=bool, count=len(self.values))
        return hit[self.codes]

    def isin(self, wanted) -> np.ndarray:
        return self.where(lambda v: v in wanted)

    def counts(self, mask: np.ndarray) -> dict[str, int]:
        n = np.bincount(self.codes[mask], minlength=len(self.values))
        return {self.values[i]: int(n[i]) for i in np.flatnonzero(n)}


def _pick(items: Sequence, idx: np.ndarray) -> Sequence:
    """items[idx] (itemgetter: a third faster than a comprehension)."""
    if len(idx) > 1:
        return itemgetter(*idx.tolist())(items)
    return [items[i] for i in idx.tolist()]


# Kinds, categories and phases as small codes while a window is built: one dict lookup per
# event, then compares of codes per row instead of compares of strings.
KIND_NAMES = ("kernel", "memcpy", "memset", "sync", "runtime", "driver", "cpu_op", "annotation",
              "marker", "alloc", "free", "oom", "collective")
_K = {k: np.int8(i) for i, k in enumerate(KIND_NAMES)}
_GPU_ANNOTATION = np.int8(len(KIND_NAMES))  # category code: an annotation on the GPU timeline
# (str | None keys: looked up with an event's cat, None where it has none)
_CATEGORY: dict[str | None, int] = {cat: int(_K[kind]) for cat, kind in CATEGORY_KIND.items()}
_CATEGORY["gpu_user_annotation"] = int(_GPU_ANNOTATION)
_KIND_OF = np.array([*range(len(KIND_NAMES)), _K["annotation"]], np.int8)  # category code -> kind
_PHASE = {"X": 0, "i": 1, "I": 2, "s": 3, "f": 4, "t": 5, "M": 6, "C": 7, "B": 8, "E": 9}
_PH_OTHER = 10
_FLOW = [_PHASE[p] for p in FLOW_PHASES]


def _kinds(names: tuple[str, ...]) -> np.ndarray:
    """Lookup table: kind code -> whether it is one of `names`."""
    table = np.zeros(len(KIND_NAMES), bool)
    table[[_K[k] for k in names]] = True
    return table


_DEVICE = _kinds(DEVICE_KINDS)
_HOST_CALL = _kinds(("runtime", "driver"))
_TYPED_ARGS = _kinds(DEVICE_KINDS + ("runtime", "driver"))


class _Fields:
    """The fields of some events: numbers and codes as arrays, names and args text as Arrow
    arrays, pid/tid as the scanner's texts (or the values of typed events), made ints after
    the rows are chosen; `take` selects rows. Read once per window, from the scanner's
    columns or from typed `Event`s (one comprehension each), flows and metadata included:
    cheaper than picking rows first."""

    def __init__(self, ph, cat, ts, dur, name: pa.StringArray, pid, tid, args: Texts,
                 arg_keys: dict[str, Texts] | None, event: Callable[[int], Event],
                 written: dict[str, pa.StringArray] | None = None, long_digits: np.ndarray | None = None):
        self.ph, self.cat, self.ts, self.dur = ph, cat, ts, dur
        self.name, self.pid, self.tid, self.args = name, pid, tid, args
        # scanned windows: the window's args keys (rows picked through `rows`, not copied at
        # each take), its ph and cat strings, and the rows whose args hold long digit runs
        self.arg_keys, self.written, self.long_digits = arg_keys, written, long_digits
        self.event = event           # the typed event of a row of the window
        self.rows = np.arange(len(ts))  # position of each row in the window

    @classmethod
    def of_chunk(cls, chunk: Chunk) -> "_Fields":
        if chunk.events is not None:
            return cls.of_events(chunk.events)
        c = chunk.scanned_columns()
        return cls(_codes(c.ph, _PHASE, _PH_OTHER).astype(np.int8), _codes(c.cat, _CATEGORY, -1).astype(np.int8),
                   c.ts, c.dur, c.name.fill_null(""), c.pid, c.tid, c.args, c.arg_keys, chunk.event,
                   {"ph": c.ph, "cat": c.cat}, c.long_digits)

    @classmethod
    def of_events(cls, evs: list[Event]) -> "_Fields":
        ph_of, cat_of = _PHASE.get, _CATEGORY.get
        # phase and category in one code (one read of each event): phase * 16 + category + 1
        both = np.array([ph_of(e.ph, _PH_OTHER) * 16 + cat_of(e.cat, -1) for e in evs], np.int16) + 1
        raws = [e.args for e in evs]
        lengths = np.fromiter(map(len, raws), np.int64, len(raws))
        offsets = np.zeros(len(raws) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        args = pa.Array.from_buffers(pa.large_binary(), len(raws),
                                     [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(raws))])
        return cls((both >> 4).astype(np.int8), ((both & 15) - 1).astype(np.int8),
                   np.array([e.ts for e in evs], dtype=float), np.array([e.dur for e in evs], dtype=float),
                   pa.array([e.name or "" for e in evs], pa.string()),
                   [e.pid for e in evs], [e.tid for e in evs], Texts(np.zeros(len(evs), np.uint8), args),
                   None, evs.__getitem__)

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, idx: np.ndarray) -> "_Fields":
        out = object.__new__(_Fields)
        out.event, out.written, out.arg_keys, out.rows = self.event, self.written, self.arg_keys, self.rows[idx]
        out.long_digits = None if self.long_digits is None else self.long_digits[idx]
        out.ph, out.cat, out.ts, out.dur = self.ph[idx], self.cat[idx], self.ts[idx], self.dur[idx]
        out.pid, out.tid = (x.take(idx) if isinstance(x, Texts) else _pick(x, idx) for x in (self.pid, self.tid))
        out.name = take_texts(self.name, idx)
        out.args = self.args.take(idx)
        return out

    def events(self, idx: np.ndarray) -> list[Event]:
        return [self.event(i) for i in self.rows[idx].tolist()]

    def category_counts(self, idx: np.ndarray) -> dict[str, int]:
        """Rows per category ("" for none), in the order the categories first appear."""
        if self.written is None:
            return Counter(self.written_as("cat", idx))
        counts = pc.value_counts(self.written["cat"].take(pa.array(self.rows[idx])).fill_null(""))
        return dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))

    def written_as(self, key: str, idx: np.ndarray) -> list[str]:
        """The phase ("ph") or category ("cat") of some rows as written ("" for none)."""
        if self.written is not None:
            return self.written[key].take(pa.array(self.rows[idx])).fill_null("").to_pylist()
        return [getattr(e, key) or "" for e in self.events(idx)]


def _codes(strings: pa.StringArray, table: dict, default: int) -> np.ndarray:
    """A small code per row from each distinct string's entry in `table` (null: None's)."""
    encoded = strings.dictionary_encode()
    values = encoded.dictionary.to_pylist()
    lut = np.array([table.get(v, default) for v in values] + [table.get(None, default)], np.int16)
    return lut[encoded.indices.fill_null(len(values)).to_numpy(zero_copy_only=False)]


def _kind_array(codes: np.ndarray) -> pa.DictionaryArray:
    """The kind column: names in the order the rows first use them (dictionary_encode's)."""
    used, first = np.unique(codes, return_index=True)
    order = used[np.argsort(first)]
    remap = np.zeros(len(KIND_NAMES), np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(remap[codes], pa.int32()),
                                          pa.array([KIND_NAMES[i] for i in order], pa.string()))


# ---------------------------------------------------------------- per chunk

def _emit_chunk(chunk: Chunk, ctx: _Context, sink: EventSink) -> None:
    n = len(chunk)
    if not n:
        return
    index = np.arange(chunk.start, chunk.start + n) if chunk.index is None else np.asarray(chunk.index)
    fields = _Fields.of_chunk(chunk)
    ph = fields.ph
    if ctx.offset_ns is None and np.isfinite(fields.ts).any():
        first_ts = float(np.nanmin(fields.ts))
        ctx.offset_ns = _clock(ctx.meta, first_ts, ctx.report)
        ctx.absolute_ts = first_ts * 1000 >= UNIX_NS_FLOOR

    is_flow = np.isin(ph, _FLOW)
    if is_flow.any():
        ctx.flows.update(fields.category_counts(np.flatnonzero(is_flow)))
    is_meta = ph == _PHASE["M"]
    ctx.metadata_events += int(is_meta.sum())
    is_counter = ph == _PHASE["C"]
    is_range = (ph == _PHASE["B"]) | (ph == _PHASE["E"])
    ctx.range_events += int(is_range.sum())
    ctx.counter_events += int(is_counter.sum())
    for i in np.flatnonzero(is_counter).tolist():
        _emit_counter(chunk.event(i), int(index[i]), ctx, sink)
    matched = [_match_range(chunk.event(i), int(index[i]), ctx) for i in np.flatnonzero(is_range).tolist()]
    pending = [p for p in matched if p is not None]

    other = is_flow | is_meta | is_counter | is_range
    if not other.any():
        _emit_rows(fields, index, ctx, sink)
    elif not other.all():
        rows = np.flatnonzero(~other)
        _emit_rows(fields.take(rows), index[rows], ctx, sink)
    del fields
    if pending:
        _emit_rows(_Fields.of_events([p[0] for p in pending]), np.array([p[1] for p in pending]), ctx, sink)


# args key -> Args field
_ARG_FIELDS = {"correlation": "correlation", "device": "device", "stream": "stream", "External id": "ext_id",
               "Bytes": "mem_bytes", "Device Id": "mem_device", "Device Type": "mem_device_type"}


class _TypedArgs:
    """The columns that come from args, for the rows whose args feed columns; -1 / NaN for
    the others. From the scanner's texts when every such value is an integer (the usual
    case), else from `Args` decoded in one call."""

    def __init__(self, f: _Fields, picked: np.ndarray):
        self.picked, self.n = picked, len(f)
        self.slot = np.full(self.n, -1, np.int64)  # row -> position among the picked rows
        self.slot[picked] = np.arange(len(picked))
        self.clamped = 0
        self.ints = _integer_args(f.arg_keys, f.rows[picked]) if f.arg_keys is not None else None
        if self.ints is None:
            none = Args()
            raws = f.args.texts.take(pa.array(picked)).to_pylist() if len(picked) else []
            decoded = decode_args([r or b"null" for r in raws]) if raws else []
            self.args = [none if a is None else a for a in decoded]

    def column(self, key: str, counted: bool = True) -> np.ndarray:
        """int64 per row from the picked rows' values of args[key] (-1 elsewhere)."""
        out = np.full(self.n, -1, np.int64)
        if not len(self.picked):
            return out
        if self.ints is not None:
            out[self.picked] = self.ints[key]
            return out
        out[self.picked], clamped = _ints([getattr(x, _ARG_FIELDS[key]) for x in self.args])
        self.clamped += clamped if counted else 0
        return out

    def mem_bytes(self, rows: np.ndarray) -> np.ndarray:
        """args.Bytes of the rows where it is a number (NaN elsewhere)."""
        at = self.slot[rows]
        if self.ints is not None:
            values = self.ints["Bytes"][at].astype(float)
            values[~self.ints[None][at]] = np.nan
            return values
        values = [self.args[j].mem_bytes for j in at.tolist()]
        return np.array([v if isinstance(v, (int, float)) else None for v in values], dtype=float)


def _integer_args(keys: dict[str, Texts], picked: np.ndarray) -> dict | None:
    """The args keys of the picked rows as int64 (-1 where absent or null), when all are
    integers within int64; None otherwise (then msgspec decodes them). Key None: where
    Bytes is present."""
    out: dict = {}
    for key, texts in keys.items():
        values = ints(texts, picked)
        if values is None:
            return None
        out[key] = values
    out[None] = keys["Bytes"].tags[picked] > NULL
    return out


def _emit_rows(f: _Fields, index: np.ndarray, ctx: _Context, sink: EventSink) -> None:
    """Complete and instant events -> rows: their kind, where they ran, their columns."""
    timed = _timed(f, index, ctx.report)
    if timed is None:
        return
    f, index = timed
    names = _Strings.of(f.name)
    kinds = _classify(f, names, ctx)
    pid, tid, device, stream, corr, launched = _placement(f, kinds, ctx)
    columns = {
        "ts": _ns(f.ts, ctx.offset_ns or 0),
        "dur": np.rint(np.maximum(np.nan_to_num(f.dur, nan=0.0), 0) * 1000).astype(np.int64),
        "kind": kinds.kind, "name": names.array,
        "pid": pid, "tid": tid, "device": device.astype(np.int32), "stream": stream,
        "corr": corr, "value": kinds.mem_bytes,
        "attrs": _attrs(f.args, f.long_digits, kinds.kind, names, kinds.is_collective, ctx),
        "loc": pc.binary_join_element_wise("traceEvents[", pa.array(index).cast(pa.string()), "]", ""),
    }
    if ctx.host:
        columns["host"] = pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(f), np.int32)),
                                                         pa.array([ctx.host], pa.string()))
    waiting = kinds.device_side & ~launched & (corr >= 0)
    if waiting.any():
        ctx.waiting.append({k: _take(v, waiting) for k, v in columns.items()})
        columns = {k: _take(v, ~waiting) for k, v in columns.items()}
    _emit(columns, sink)


def _timed(f: _Fields, index: np.ndarray, report: ParseReport) -> tuple[_Fields, np.ndarray] | None:
    """The events with a numeric ts (the others counted and the first few named); None: none."""
    has_ts = np.isfinite(f.ts)
    if has_ts.all():
        return f, index
    report.skipped["event without ts"] += int((~has_ts).sum())
    for i in index[~has_ts][:5]:
        report.warn(f"traceEvents[{i}]: event without a numeric ts skipped")
    keep = np.flatnonzero(has_ts)
    return (f.take(keep), index[keep]) if len(keep) else None


@dataclass
class _Kinds:
    kind: np.ndarray           # kind code per row (KIND_NAMES)
    args: _TypedArgs           # typed args of the rows whose args feed columns
    mem_bytes: np.ndarray      # args.Bytes of memory instants, NaN elsewhere
    is_memory: np.ndarray
    is_collective: np.ndarray
    device_side: np.ndarray    # rows on a GPU's timeline (device/stream columns)


def _classify(f: _Fields, names: _Strings, ctx: _Context) -> _Kinds:
    """Each row's kind from its category, phase and name (memory instants, OOMs, NCCL kernels
    and collectives); unknown categories and phases are counted in the report."""
    report, ph, cat = ctx.report, f.ph, f.cat
    known = cat >= 0
    is_gpu_annotation = cat == _GPU_ANNOTATION
    kind = _KIND_OF[np.where(known, cat, _K["marker"])]
    memory_name = names.isin((MEMORY_EVENT, OOM_EVENT))
    a = _TypedArgs(f, np.flatnonzero(_TYPED_ARGS[kind] | is_gpu_annotation | memory_name))

    instant = (ph == _PHASE["i"]) | (ph == _PHASE["I"])
    is_oom = names.isin((OOM_EVENT,)) & instant
    is_memory = memory_name & instant
    mem_bytes = np.full(len(f), np.nan)
    if is_memory.any():
        mem_bytes[is_memory] = a.mem_bytes(np.flatnonzero(is_memory))
    freed = mem_bytes < 0
    kind[is_memory & ~freed] = _K["alloc"]
    kind[is_memory & freed] = _K["free"]
    kind[is_oom] = _K["oom"]

    kineto_marker = names.where(lambda v: v.startswith(KINETO_MARKER_NAMES))
    unknown = ~known & ~is_memory & ~kineto_marker
    if unknown.any():
        # every row of an unknown category is here: their order of first appearance is the rows'
        rows = np.flatnonzero(~known)
        cats = _Strings.of(f.written_as("cat", rows))
        for c, cnt in cats.counts(unknown[rows]).items():
            report.skipped[f"category {c or '(none)'}"] += cnt
    other_phase = ph > _PHASE["I"]  # neither complete nor instant (memory rows are instants)
    if other_phase.any():
        rows = np.flatnonzero(other_phase)
        phases = _Strings.of(f.written_as("ph", rows))
        for p, cnt in phases.counts(np.ones(len(rows), bool)).items():
            report.skipped[f"phase {p}"] += cnt
        kind[other_phase] = _K["marker"]

    nccl_kernel = (kind == _K["kernel"]) & names.where(lambda v: v.startswith(NCCL_KERNEL_PREFIXES))
    param_comms = (kind == _K["cpu_op"]) & names.isin((PARAM_COMMS_OP,))
    is_collective = nccl_kernel | param_comms
    ctx.collectives += int(is_collective.sum())
    kind[is_collective] = _K["collective"]
    device_side = _DEVICE[kind] | nccl_kernel | is_gpu_annotation
    return _Kinds(kind, a, mem_bytes, is_memory, is_collective, device_side)


def _placement(f: _Fields, kinds: _Kinds, ctx: _Context):
    """pid, tid, device, stream, corr per row, and which GPU rows found their launch: a GPU
    row's device/stream come from its args (else its pid/tid), its pid/tid from the runtime
    call that launched it (matched by correlation id, over the whole file)."""
    kind, a, device_side = kinds.kind, kinds.args, kinds.device_side
    pid, c1 = _int_field(f.pid) if isinstance(f.pid, Texts) else _ints(f.pid)
    tid, c2 = _int_field(f.tid) if isinstance(f.tid, Texts) else _ints(f.tid)
    corr = a.column("correlation")
    arg_device = a.column("device")
    arg_stream = a.column("stream")
    ctx.clamped += c1 + c2 + a.clamped

    host_call = _HOST_CALL[kind] & (corr >= 0)
    if host_call.any():
        ctx.launches.add(corr[host_call], pid[host_call], tid[host_call])
    n = len(f)
    device = np.full(n, -1, np.int64)
    stream = np.full(n, -1, np.int64)
    device[device_side] = np.where(arg_device >= 0, arg_device, pid)[device_side]
    stream[device_side] = np.where(arg_stream >= 0, arg_stream, tid)[device_side]
    if kinds.is_memory.any():
        mem_dev = a.column("Device Id", counted=False)
        mem_type = a.column("Device Type", counted=False)
        gpu_mem = kinds.is_memory & (mem_type != 0) & (mem_dev >= 0)
        device[gpu_mem] = mem_dev[gpu_mem]
    # a GPU row's pid/tid are its device/stream; the host's come from its launch
    pos, launched = ctx.launches.find(corr)
    launched &= device_side
    pid[device_side], tid[device_side] = -1, -1
    pid[launched], tid[launched] = ctx.launches.pid[pos[launched]], ctx.launches.tid[pos[launched]]
    return pid, tid, device, stream, corr, launched


def _emit(columns: dict, sink: EventSink) -> None:
    columns["kind"] = _kind_array(columns["kind"])
    sink.emit_columns(columns)


def _take(col, mask: np.ndarray):
    return col.filter(pa.array(mask)) if isinstance(col, pa.Array) else col[mask]


def _emit_waiting_rows(ctx: _Context, sink: EventSink) -> None:
    """GPU-side rows whose launch came later in the file (or never: pid/tid stay -1)."""
    for columns in ctx.waiting:
        pos, launched = ctx.launches.find(columns["corr"])
        columns["pid"][launched] = ctx.launches.pid[pos[launched]]
        columns["tid"][launched] = ctx.launches.tid[pos[launched]]
        _emit(columns, sink)
    ctx.waiting.clear()


def _attrs(args: Texts, long_digits: np.ndarray | None, kind: np.ndarray, names: _Strings,
           is_collective: np.ndarray, ctx: _Context) -> pa.Array:
    """The event's args untouched (the window's texts, no bytes object per row), plus
    derived keys for memcpy, steps and collectives; `{}` for events without args.
    `long_digits`: the rows whose args may hold an integer beyond int64 (the scanner's; None:
    found here)."""
    n = len(args.texts)
    data: bytes | memoryview  # the window's bytes, or a copy with some rows replaced
    offsets, data = _text_buffers(args.texts)
    is_step = names.where(lambda v: v.startswith("ProfilerStep#"))
    enrich = is_collective | (kind == _K["memcpy"]) | is_step
    maybe_big = np.flatnonzero(long_digits) if long_digits is not None else _long_digit_runs(data, offsets)
    for i in maybe_big.tolist():
        if not enrich[i] and has_big_int(bytes(data[offsets[i]:offsets[i + 1]])):
            enrich[i] = True
    patches: dict[int, bytes] = {}
    for i in np.flatnonzero(enrich).tolist():
        loaded = load_args(bytes(data[offsets[i]:offsets[i + 1]]))
        name = names.values[names.codes[i]]
        if is_collective[i]:
            loaded.update(collective_attrs(name, loaded, ctx.rank))
        elif kind[i] == _K["memcpy"]:
            loaded.update(memcpy_attrs(name))
        elif is_step[i]:
            loaded.update(step_attrs(name))
        loaded, big = stringify_big_ints(loaded)
        ctx.big_int_attrs += big
        patches[i] = dumps_attrs(loaded).encode()
    for i in np.flatnonzero(offsets[1:] == offsets[:-1]).tolist():
        patches.setdefault(i, b"{}")
    if patches:
        data, offsets = _patched(data, offsets, patches)
    buf = pa.py_buffer(data)  # no copy
    wide = len(data) >= 1 << 31
    binary = pa.Array.from_buffers(pa.large_binary() if wide else pa.binary(), n,
                                   [None, pa.py_buffer(offsets if wide else offsets.astype(np.int32)), buf])
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:  # args holding bytes that are not UTF-8: replaced, not fatal
        o = offsets.tolist()
        return pa.array([bytes(data[o[i]:o[i + 1]]).decode("utf-8", "replace") for i in range(n)], pa.string())


def _text_buffers(texts: pa.Array) -> tuple[np.ndarray, memoryview]:
    """A (large) binary array's offsets (int64, from 0) and its bytes."""
    _, off_buf, data_buf = texts.buffers()
    wide = pa.types.is_large_binary(texts.type)
    offsets = np.frombuffer(off_buf, np.int64 if wide else np.int32, count=len(texts) + 1,
                            offset=texts.offset * (8 if wide else 4)).astype(np.int64)
    data = memoryview(data_buf if data_buf is not None else b"")[offsets[0]:offsets[-1]]
    return offsets - offsets[0], data


def _patched(data: bytes | memoryview, offsets: np.ndarray, patches: dict[int, bytes]) -> tuple[bytes, np.ndarray]:
    """`data` (rows at `offsets`) with some rows' bytes replaced."""
    view = memoryview(data)
    pieces: list[bytes | memoryview] = []
    prev = 0
    lengths = np.diff(offsets)
    for i in sorted(patches):
        pieces.append(view[offsets[prev]:offsets[i]])
        pieces.append(patches[i])
        lengths[i] = len(patches[i])
        prev = i + 1
    pieces.append(view[offsets[prev]:])
    new = np.zeros(len(offsets), np.int64)
    np.cumsum(lengths, out=new[1:])
    return b"".join(pieces), new


def _long_digit_runs(data: bytes | memoryview, offsets: np.ndarray) -> np.ndarray:
    """Rows whose bytes may hold an integer beyond int64 (a run of 19+ digits that does not
    follow a `.`), found without Python per byte: such a run holds 6 consecutive bytes at
    positions that are multiples of 3, so a third of the bytes is looked at, as whole arrays;
    then the runs behind a `.` (a float's fraction, the usual long run) are dropped."""
    whole = np.frombuffer(data, np.uint8)
    samples = (len(whole) + 2) // 3
    if samples < 6:
        return np.empty(0, np.int64)  # under 18 bytes: no such run
    hits = np.concatenate([_six_digit_samples(whole, lo) for lo in range(0, samples - 5, _RUN_BLOCK)]) * 3
    if not len(hits):
        return hits
    rows = np.searchsorted(offsets, hits, side="right") - 1
    back = hits[:, None] - np.arange(1, _BACK + 1)  # the bytes before each hit, nearest first
    in_row = back >= offsets[rows][:, None]
    before = whole[np.maximum(back, 0)]
    digit = ((before - np.uint8(48)) < 10) & in_row
    first = np.argmin(digit, axis=1)  # where the run starts (a non-digit, or the row's start)
    at = np.arange(len(hits))
    fraction = ~digit.all(axis=1) & in_row[at, first] & (before[at, first] == 0x2E)
    return np.unique(rows[~fraction])


_BACK = 24  # bytes looked at behind a long run for the `.` of a fraction
# Samples per block: a block's temporaries stay under the allocator's mmap threshold, so they
# reuse the same heap pages instead of being mapped (and page-faulted) anew for every window.
_RUN_BLOCK = 1 << 18


def _six_digit_samples(whole: np.ndarray, lo: int) -> np.ndarray:
    """Sample positions k in [lo, lo + _RUN_BLOCK) where the samples k..k+5 (bytes 3k, 3k+3, ...)
    are all digits."""
    third = np.ascontiguousarray(whole[lo * 3:(lo + _RUN_BLOCK + 5) * 3:3])  # strided arithmetic is 3x slower
    run = (third - np.uint8(48)) < 10  # below '0' wraps around
    run = run[:-1] & run[1:]
    run = run[:-2] & run[2:]
    run = run[:-2] & run[2:]  # six samples in a row are digits
    return np.flatnonzero(run) + lo


# ---------------------------------------------------------------- rare phases

def _emit_counter(ev: Event, index: int, ctx: _Context, sink: EventSink) -> None:
    """A `C` event: one sample per numeric series in args."""
    if ev.ts is None:
        ctx.report.skipped["event without ts"] += 1
        return
    series = {k: v for k, v in load_args(bytes(ev.args)).items()
              if isinstance(v, (int, float)) and not isinstance(v, bool)}
    ts = int(_ns(np.array([ev.ts]), ctx.offset_ns or 0)[0])
    for key, v in series.items():
        name = ev.name or key
        if len(series) > 1:
            name = f"{name}/{key}"
        sink.emit(ts=ts, kind="sample", name=name, value=float(v), host=ctx.host,
                  pid=_ints([ev.pid])[0][0], tid=_ints([ev.tid])[0][0],
                  loc=f"traceEvents[{index}]", attrs={"category": ev.cat, "series": key})


def _match_range(ev: Event, index: int, ctx: _Context) -> tuple[Event, int] | None:
    """B/E pairs become one complete event (returned when the E arrives)."""
    key = (ev.pid, ev.tid)
    if ev.ph == "B":
        ctx.open_ranges.setdefault(key, []).append((ev, index))
        return None
    stack = ctx.open_ranges.get(key)
    if not stack:
        ctx.report.skipped["E event without B"] += 1
        return None
    begin, begin_index = stack.pop()
    if begin.ts is None or ev.ts is None:
        return (begin, begin_index)  # counted as "event without ts" later
    return (msgspec.structs.replace(begin, ph="X", dur=ev.ts - begin.ts), begin_index)


def _close_open_ranges(ctx: _Context, sink: EventSink) -> None:
    left = [item for stack in ctx.open_ranges.values() for item in stack]
    if not left:
        return
    ctx.report.warn(f"{len(left):,} B event(s) without a matching E kept with duration 0")
    _emit_rows(_Fields.of_events([msgspec.structs.replace(e, ph="X", dur=0.0) for e, _ in left]),
               np.array([i for _, i in left]), ctx, sink)
