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

from ingest.clock import Clock
from ingest.events import INT64_MAX, INT64_MIN, EventSink, ParseReport, dumps_attrs
from ingest.io import is_gzip
from ingest.parsers.kineto.decode import (
    Args, Chunk, Event, TraceReader, decode_args, has_big_int, peek_trailer,
)
from ingest.parsers.kineto.kinds import (
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


def sniff(head: bytes, name: str) -> bool:
    start = head.lstrip()[:1]
    return start == b"{" and b'"traceEvents"' in head and any(k in head for k in _KINETO_KEYS)


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
    """`order` (ingest.kineto_ranges) gets what a byte range's merge needs to put the rows in
    the order of the whole file's parse: where the waiting rows start, the B/E and C events."""
    reader = TraceReader(Path(path))
    chunks = reader.chunks()
    chunk = next(chunks, None)  # reads the header
    ahead = peek_trailer(reader.path) if _trailer_may_matter(reader, chunk) else {}
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

    broken = reader.broken
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
    ts = [e.ts for e in (first.events[:1000] if first else ()) if isinstance(e.ts, (int, float))]
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
    def of(cls, items: Sequence[str]) -> "_Strings":
        array = pa.array(items, pa.string()).dictionary_encode()
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
_CATEGORY = {cat: int(_K[kind]) for cat, kind in CATEGORY_KIND.items()} | {
    "gpu_user_annotation": int(_GPU_ANNOTATION)}
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
    """The fields of some events, one comprehension each: numbers and codes as arrays, the
    rest as lists; `take` selects rows. Read once per window (flows and metadata included:
    cheaper than picking the rows' events first and reading those)."""

    def __init__(self, evs: list[Event]):
        ph_of, cat_of = _PHASE.get, _CATEGORY.get
        # phase and category in one code (one read of each event): phase * 16 + category + 1
        both = np.array([ph_of(e.ph, _PH_OTHER) * 16 + cat_of(e.cat, -1) for e in evs], np.int16) + 1
        self.ph = (both >> 4).astype(np.int8)
        self.cat = ((both & 15) - 1).astype(np.int8)
        self.ts = np.array([e.ts for e in evs], dtype=float)  # None -> NaN
        self.dur = np.array([e.dur for e in evs], dtype=float)
        self.name = [e.name or "" for e in evs]
        self.pid = [e.pid for e in evs]
        self.tid = [e.tid for e in evs]
        self.args = [e.args for e in evs]
        self.evs = evs
        self.rows = np.arange(len(evs))  # position of each row in `evs`

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, idx: np.ndarray) -> "_Fields":
        out = object.__new__(_Fields)
        out.evs, out.rows = self.evs, self.rows[idx]
        out.ph, out.cat, out.ts, out.dur = self.ph[idx], self.cat[idx], self.ts[idx], self.dur[idx]
        out.name, out.pid, out.tid, out.args = (_pick(x, idx) for x in (self.name, self.pid, self.tid, self.args))
        return out

    def events(self, idx: np.ndarray) -> Sequence[Event]:
        return _pick(self.evs, self.rows[idx])


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
    evs = chunk.events
    n = len(evs)
    if not n:
        return
    index = np.arange(chunk.start, chunk.start + n) if chunk.index is None else np.asarray(chunk.index)
    fields = _Fields(evs)
    ph = fields.ph
    if ctx.offset_ns is None and np.isfinite(fields.ts).any():
        first_ts = float(np.nanmin(fields.ts))
        ctx.offset_ns = _clock(ctx.meta, first_ts, ctx.report)
        ctx.absolute_ts = first_ts * 1000 >= UNIX_NS_FLOOR

    is_flow = np.isin(ph, _FLOW)
    if is_flow.any():
        ctx.flows.update([evs[i].cat or "" for i in np.flatnonzero(is_flow).tolist()])
    is_meta = ph == _PHASE["M"]
    ctx.metadata_events += int(is_meta.sum())
    is_counter = ph == _PHASE["C"]
    is_range = (ph == _PHASE["B"]) | (ph == _PHASE["E"])
    ctx.range_events += int(is_range.sum())
    ctx.counter_events += int(is_counter.sum())
    for i in np.flatnonzero(is_counter):
        _emit_counter(evs[i], int(index[i]), ctx, sink)
    pending = [_match_range(evs[i], int(index[i]), ctx) for i in np.flatnonzero(is_range)]
    pending = [p for p in pending if p is not None]

    other = is_flow | is_meta | is_counter | is_range
    if not other.any():
        _emit_rows(fields, index, ctx, sink)
    elif not other.all():
        rows = np.flatnonzero(~other)
        _emit_rows(fields.take(rows), index[rows], ctx, sink)
    del fields
    if pending:
        _emit_rows(_Fields([p[0] for p in pending]), np.array([p[1] for p in pending]), ctx, sink)


class _TypedArgs:
    """The columns that come from args, for the rows whose args feed columns (decoded in one
    call); -1 / NaN for the others."""

    def __init__(self, raws: Sequence[msgspec.Raw], picked: np.ndarray):
        self.picked, self.n = picked, len(raws)
        self.slot = np.full(self.n, -1, np.int64)  # row -> position in `args`
        self.slot[picked] = np.arange(len(picked))
        none = Args()
        decoded = decode_args([raws[i] or b"null" for i in picked.tolist()]) if len(picked) else []
        self.args = [none if a is None else a for a in decoded]
        self.clamped = 0

    def column(self, values: list, counted: bool = True) -> np.ndarray:
        """int64 per row from the picked rows' values (-1 elsewhere)."""
        out = np.full(self.n, -1, np.int64)
        if values:
            out[self.picked], clamped = _ints(values)
            self.clamped += clamped if counted else 0
        return out

    def mem_bytes(self, rows: np.ndarray) -> np.ndarray:
        """args.Bytes of the rows where it is a number (NaN elsewhere)."""
        args = self.args
        values = [args[j].mem_bytes for j in self.slot[rows].tolist()]
        return np.array([v if isinstance(v, (int, float)) else None for v in values], dtype=float)


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
        "attrs": _attrs(f.args, kinds.kind, names, kinds.is_collective, ctx),
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
    a = _TypedArgs(f.args, np.flatnonzero(_TYPED_ARGS[kind] | is_gpu_annotation | memory_name))

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
        cats = _Strings.of([e.cat or "" for e in f.events(rows)])
        for c, cnt in cats.counts(unknown[rows]).items():
            report.skipped[f"category {c or '(none)'}"] += cnt
    other_phase = ph > _PHASE["I"]  # neither complete nor instant (memory rows are instants)
    if other_phase.any():
        rows = np.flatnonzero(other_phase)
        phases = _Strings.of([e.ph for e in f.events(rows)])
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
    pid, c1 = _ints(f.pid)
    tid, c2 = _ints(f.tid)
    args = a.args
    corr = a.column([x.correlation for x in args])
    arg_device = a.column([x.device for x in args])
    arg_stream = a.column([x.stream for x in args])
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
        mem_dev = a.column([x.mem_device for x in args], counted=False)
        mem_type = a.column([x.mem_device_type for x in args], counted=False)
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


def _attrs(raws: Sequence[msgspec.Raw], kind: np.ndarray, names: _Strings, is_collective: np.ndarray,
           ctx: _Context) -> pa.Array:
    """The event's args untouched (one join of the raw views, no bytes object per row),
    plus derived keys for memcpy, steps and collectives; `{}` for events without args."""
    n = len(raws)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(map(len, raws), np.int64, n), out=offsets[1:])
    data = b"".join(raws)
    is_step = names.where(lambda v: v.startswith("ProfilerStep#"))
    enrich = is_collective | (kind == _K["memcpy"]) | is_step
    for i in _long_digit_runs(data, offsets).tolist():
        if not enrich[i] and has_big_int(bytes(raws[i])):
            enrich[i] = True
    patches: dict[int, bytes] = {}
    for i in np.flatnonzero(enrich).tolist():
        args = load_args(bytes(raws[i]))
        name = names.values[names.codes[i]]
        if is_collective[i]:
            args.update(collective_attrs(name, args, ctx.rank))
        elif kind[i] == _K["memcpy"]:
            args.update(memcpy_attrs(name))
        elif is_step[i]:
            args.update(step_attrs(name))
        args, big = stringify_big_ints(args)
        ctx.big_int_attrs += big
        patches[i] = dumps_attrs(args).encode()
    for i in np.flatnonzero(offsets[1:] == offsets[:-1]).tolist():
        patches.setdefault(i, b"{}")
    if patches:
        data, offsets = _patched(data, offsets, patches)
    buf = pa.py_buffer(data)  # no copy: Arrow runs on the system allocator (ingest.process_memory)
    wide = len(data) >= 1 << 31
    binary = pa.Array.from_buffers(pa.large_binary() if wide else pa.binary(), n,
                                   [None, pa.py_buffer(offsets if wide else offsets.astype(np.int32)), buf])
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:  # args holding bytes that are not UTF-8: replaced, not fatal
        o = offsets.tolist()
        return pa.array([data[o[i]:o[i + 1]].decode("utf-8", "replace") for i in range(n)], pa.string())


def _patched(data: bytes, offsets: np.ndarray, patches: dict[int, bytes]) -> tuple[bytes, np.ndarray]:
    """`data` (rows at `offsets`) with some rows' bytes replaced."""
    view = memoryview(data)
    pieces, prev = [], 0
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


def _long_digit_runs(data: bytes, offsets: np.ndarray) -> np.ndarray:
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
    _emit_rows(_Fields([msgspec.structs.replace(e, ph="X", dur=0.0) for e, _ in left]),
               np.array([i for _, i in left]), ctx, sink)
