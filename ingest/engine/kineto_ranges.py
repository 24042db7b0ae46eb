"""One big uncompressed Kineto JSON trace parsed as byte ranges by several workers, merged
into the rows one parse of the whole file gives (same rows, same order, same `loc`).

The Kineto reader (kineto.decode) decodes the traceEvents array window by window: it reads
the file in blocks of WINDOW_BYTES and cuts each window after the last `}` followed by
`,{` in its last CUT_SPAN bytes that decodes. Rows depend on those windows (a GPU row whose
launch is in the same or an earlier window takes its pid/tid at once, the others wait to the
end of the file; B/E and C events' rows have their own place in a window). So the ranges are
made of whole windows of the single parse: the planner finds the cuts the reader will make
(the last candidate of each window; a candidate inside a string is caught below), and a
range is parsed as a synthetic document that the reader windows the same way:

    {<header and trailer keys>,"traceEvents":[<spaces><the range's events>,{"ph":"M"}]}

The spaces put every event byte at the same offset modulo WINDOW_BYTES as in the file
(reads are block-aligned); the closing metadata event keeps the range's last cut a cut (the
merge takes it off the counts). The last range ends with the file's own end (the trailer).
If a synthetic document does not decode, a planned cut sat inside a string: the merge
parses the whole file instead, as it does when a range's rows cannot be put in the single
parse's order (see `merge`): slower, never different.

Only plain (not gzip) files are split: a gzip stream cannot be entered mid-way.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.io import count_bytes_read, is_gzip, open_bytes
from ingest.engine.log_ranges import JsonCarried
from ingest.engine.parse import event_file, run_parser
from ingest.engine.parsers.kineto import decode, trace

CLOSING_EVENT = b',{"ph":"M"}]}'  # after a range's last event: its cut stays a candidate
COUNTED_META = ("flows", "flow_events", "metadata_events", "trace_events", "parse_seconds")
# warnings a range gives as the single parse does (or as counts the merge adds up)
_CLOCK_WARNING = "baseTimeNanoseconds ignored: ts values are already absolute"
_COUNTED_WARNINGS = {
    "clamped": re.compile(r"^([\d,]+) integer value\(s\) outside int64 set to -1 in the table \(originals kept in attrs\)$"),
    "big_ints": re.compile(r"^([\d,]+) integer\(s\) beyond int64 in event args kept as strings in attrs$"),
}
_HOST_KINDS = ("runtime", "driver")
_LOC_PREFIX = len("traceEvents[")


@dataclass(frozen=True)
class EventRange:
    """Bytes [start, end) of the file: the range's events (through its last `}`; the last
    range runs to the end of the file)."""
    start: int
    end: int
    last: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> "EventRange":
        return cls(d["start"], d["end"], d["last"])


@dataclass
class RangeOutcome(JsonCarried):
    """What parsing one range gave, carried to the merge as JSON."""
    events: int = 0                 # rows
    trace_events: int = 0           # traceEvents of the range (its closing event not counted)
    waiting_from: int = 0           # rows from here on waited for their launch (to the range's end)
    range_events: int = 0
    counter_events: int = 0
    warnings: list[str] = field(default_factory=list)
    skipped: list = field(default_factory=list)   # [[type, count]] in the order first seen
    meta: dict = field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0


# ---------------------------------------------------------------- plan

def _header(path: Path) -> tuple[dict[str, msgspec.Raw], int]:
    """The keys before traceEvents and the offset of the array's content (after its `[`)."""
    reader = decode.TraceReader(path)
    with open_bytes(path) as stream:
        _, pos = reader._read_header(decode._Content(path, stream))
    return reader.header, pos


def _array_end(path: Path) -> tuple[int, dict[str, msgspec.Raw]] | None:
    """Offset of the `]` ending traceEvents and the keys after it, found as
    decode.peek_trailer finds them (None: not in the last TAIL_BYTES)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - decode.TAIL_BYTES))
        tail = f.read()
    for m in re.finditer(rb"\]", tail):
        try:
            top = decode._TOP.decode(decode._OPEN_TOP + tail[m.start():])
        except msgspec.DecodeError:
            continue
        top.pop("traceEvents")
        return size - len(tail) + m.start(), top
    return None


def _last_candidate(f, lo: int, hi: int) -> int | None:
    """Offset of the `}` of the last `}\\s*,\\s*{` wholly inside bytes [lo, hi)."""
    f.seek(lo)
    found = None
    for m in decode._BOUNDARY.finditer(f.read(hi - lo)):
        found = m.start()
    return None if found is None else lo + found


def reader_cuts(path: Path, content_start: int, array_end: int) -> list[tuple[int, int]]:
    """(offset of the `}`, offset after the `,`) of the cuts the reader makes before the
    window that reaches the array's end, assuming each window's last candidate decodes (the
    ranges check it at their ends). Mirrors decode._last_cuts and TraceReader.chunks.

    Every window ends at a multiple of WINDOW_BYTES and the reader looks for its cut in the
    window's last CUT_SPAN bytes only, so where a window starts (whether the cut before it
    was the one assumed) does not change its cut. A window without a candidate there would
    be searched from its start, or read on: the cuts stop before it (the rest is one range)."""
    window, span = decode.WINDOW_BYTES, decode.CUT_SPAN
    cuts: list[tuple[int, int]] = []
    start = content_start            # the current window's first content byte
    block_end = (content_start // window + 1) * window
    with open(path, "rb") as f:
        while block_end < array_end:
            c = _last_candidate(f, max(start, block_end - span), block_end)
            if c is None:
                return cuts
            f.seek(c + 1)
            after = f.read(block_end - c - 1)
            start = c + 1 + decode.space_end(after) + 1  # after the `,`
            cuts.append((c, start))
            block_end += window
    return cuts


def plan_ranges(path: Path, part_bytes: int) -> list[EventRange]:
    """Ranges of at least `part_bytes` (whole windows of the reader); [] when the file is
    not split (gzip, one window, no trailer found where the reader looks for it)."""
    path = Path(path)
    size = path.stat().st_size
    whole: list[EventRange] = []
    if is_gzip(path):
        return whole
    try:
        _, content_start = _header(path)
    except ParseError:
        return whole                 # the whole parse reports it
    end = _array_end(path)
    if end is None or end[1] != decode.peek_trailer(path):
        return whole
    bounds = [content_start]
    ends = []
    for c, nxt in reader_cuts(path, content_start, end[0]):
        if c + 1 - bounds[-1] >= part_bytes:
            ends.append(c + 1)
            bounds.append(nxt)
    if not ends:
        return whole
    ranges = [EventRange(s, e, False) for s, e in zip(bounds, ends)]
    return ranges + [EventRange(bounds[-1], size, True)]


# ---------------------------------------------------------------- one range

def synthetic_document(path: Path, rng: EventRange, out: Path) -> Path:
    """The document whose parse gives the range's rows (see the module's docstring)."""
    header, _ = _header(path)
    end = _array_end(path)
    keys = header | (end[1] if end else {})
    head = b"{" + b"".join(msgspec.json.encode(k) + b":" + bytes(v) + b"," for k, v in keys.items()) \
        + b'"traceEvents":['
    pad = (rng.start - len(head)) % decode.WINDOW_BYTES
    with open(path, "rb") as src, open(out, "wb") as dst:
        dst.write(head)
        dst.write(b" " * pad)
        src.seek(rng.start)
        left = rng.end - rng.start
        while left > 0:
            block = src.read(min(left, 8 << 20))
            if not block:
                break
            dst.write(block)
            left -= len(block)
        if not rng.last:
            dst.write(CLOSING_EVENT)
    return out


def parse_range(path: Path, rng: EventRange, name: str, on_batch: Callable, tmp: Path,
                progress: Callable | None = None) -> RangeOutcome:
    """The rows of the range (to `on_batch`) and what the merge needs; `progress(rows,
    bytes of the synthetic document read)` as it goes."""
    started = time.perf_counter()
    out = RangeOutcome()
    doc = synthetic_document(Path(path), rng, Path(tmp) / "range.json")
    report = ParseReport(format=trace.FORMAT)
    order: dict = {}
    sink = EventSink(name, trace.SOURCE, on_batch)

    class _Parser:  # trace's parse with the `order` it fills
        FORMAT, SOURCE = trace.FORMAT, trace.SOURCE

        @staticmethod
        def parse(p, s, r):
            trace.parse(p, s, r, order)
    try:
        with count_bytes_read((lambda read: progress(sink.count, read)) if progress else None):
            run_parser(_Parser, doc, sink, report, name)  # type: ignore[arg-type]
    except ParseError as e:
        out.error = str(e)[:300]
        return out
    finally:
        doc.unlink(missing_ok=True)
    closing = 0 if rng.last else 1
    out.events, out.trace_events = sink.count, report.meta.get("trace_events", 0) - closing
    out.waiting_from = order.get("waiting_from", sink.count)
    out.range_events, out.counter_events = order.get("range_events", 0), order.get("counter_events", 0)
    out.warnings, out.skipped = list(report.warnings), [[k, v] for k, v in report.skipped.items()]
    report.meta["metadata_events"] = report.meta.get("metadata_events", 0) - closing
    report.meta["trace_events"] = out.trace_events
    out.meta = json.loads(json.dumps(report.meta, default=str))
    out.seconds = round(time.perf_counter() - started, 3)
    return out


def parse_range_to_parquet(path: Path, rng: EventRange, out: Path, name: str, tmp: Path,
                           progress: Callable | None = None) -> RangeOutcome:
    with event_file(out) as on_batch:
        return parse_range(path, rng, name, on_batch, tmp, progress)


# ---------------------------------------------------------------- merge

def consistent(outcomes: list[RangeOutcome]) -> str:
    """"" when the ranges' results can be merged, else why not (the whole file is parsed)."""
    first = outcomes[0]
    for i, o in enumerate(outcomes, 1):
        if o.error:
            return f"range {i} failed: {o.error}"
        if _uncounted_warnings(o):
            return f"range {i} warned what only the whole parse words right: {_uncounted_warnings(o)[0]}"
        skipped = dict(o.skipped)
        for what in ("broken event", "event without ts", "E event without B"):
            if skipped.get(what):
                return f"range {i}: {what} (its position is relative to the range)"
        if {k: v for k, v in o.meta.items() if k not in COUNTED_META} != \
                {k: v for k, v in first.meta.items() if k not in COUNTED_META}:
            return f"range {i} decided its clock or read its top-level keys otherwise than range 1"
        if (_CLOCK_WARNING in o.warnings) != (_CLOCK_WARNING in first.warnings):
            return f"range {i} decided its clock otherwise than range 1"
    return ""


def _uncounted_warnings(o: RangeOutcome) -> list[str]:
    return [w for w in o.warnings if w != _CLOCK_WARNING
            and not any(p.match(w) for p in _COUNTED_WARNINGS.values())]


def _counted(warnings: list[str], what: str) -> int:
    for w in warnings:
        m = _COUNTED_WARNINGS[what].match(w)
        if m:
            return int(m.group(1).replace(",", ""))
    return 0


def merged_report(outcomes: list[RangeOutcome]) -> ParseReport:
    """The whole file's report: counts added up, the rest from the first range."""
    report = ParseReport(format=trace.FORMAT)
    report.meta = json.loads(json.dumps(outcomes[0].meta))
    flows: dict[str, int] = {}
    for o in outcomes:
        for cat, n in o.meta.get("flows", {}).items():
            flows[cat] = flows.get(cat, 0) + n
        for k, n in o.skipped:
            report.skipped[k] += n
    report.meta["flows"] = flows
    for key in ("flow_events", "metadata_events", "trace_events"):
        report.meta[key] = sum(o.meta.get(key, 0) for o in outcomes)
    report.meta["parse_seconds"] = round(sum(o.seconds for o in outcomes), 3)
    if _CLOCK_WARNING in outcomes[0].warnings:
        report.warn(_CLOCK_WARNING)
    clamped = sum(_counted(o.warnings, "clamped") for o in outcomes)
    big = sum(_counted(o.warnings, "big_ints") for o in outcomes)
    if clamped:
        report.warn(f"{clamped:,} integer value(s) outside int64 set to -1 in the table "
                    "(originals kept in attrs)")
    if big:
        report.warn(f"{big:,} integer(s) beyond int64 in event args kept as strings in attrs")
    report.events = sum(o.events for o in outcomes)
    return report


class Launches:
    """Correlation id -> pid/tid of its runtime/driver call, over all ranges (the first in
    each range's rows wins, as trace._LaunchMap); `ranges` says which range launched it."""

    def __init__(self):
        self.corr = self.pid = self.tid = self.range = np.empty(0, np.int64)

    @classmethod
    def of(cls, tables: list[pa.Table]) -> "Launches | None":
        """None when a correlation id is launched in two ranges (the whole parse's "first
        wins" could then differ from a range's)."""
        corr, pid, tid, rng = [], [], [], []
        for k, t in enumerate(tables):
            kind = pc.cast(t.column("kind"), pa.string())
            host = pc.and_(pc.is_in(kind, pa.array(_HOST_KINDS)), pc.greater_equal(t.column("corr"), 0))
            picked = t.filter(host)
            c = picked.column("corr").to_numpy()
            c, first = np.unique(c, return_index=True)
            corr.append(c)
            pid.append(picked.column("pid").to_numpy()[first])
            tid.append(picked.column("tid").to_numpy()[first])
            rng.append(np.full(len(c), k, np.int64))
        out = cls()
        all_corr = np.concatenate(corr) if corr else np.empty(0, np.int64)
        order = np.argsort(all_corr, kind="stable")
        out.corr = all_corr[order]
        if len(out.corr) and (np.diff(out.corr) == 0).any():
            return None
        out.pid, out.tid = np.concatenate(pid)[order], np.concatenate(tid)[order]
        out.range = np.concatenate(rng)[order]
        return out

    def find(self, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not len(self.corr):
            return np.zeros(len(corr), np.int64), np.zeros(len(corr), bool)
        pos = np.minimum(np.searchsorted(self.corr, corr), len(self.corr) - 1)
        return pos, (self.corr[pos] == corr) & (corr >= 0)


def _indices(table: pa.Table) -> np.ndarray:
    """traceEvents index of each row (from `loc`)."""
    loc = pc.cast(table.column("loc"), pa.string())
    return pc.cast(pc.utf8_slice_codeunits(loc, _LOC_PREFIX, -1), pa.int64()).to_numpy()


def _with_locs(table: pa.Table, index: np.ndarray) -> pa.Table:
    loc = pc.binary_join_element_wise("traceEvents[", pa.array(index).cast(pa.string()), "]", "")
    return table.set_column(table.schema.get_field_index("loc"), table.schema.field("loc"),
                            pc.cast(loc, table.schema.field("loc").type))


def _placed(table: pa.Table, rows: np.ndarray, launches: Launches) -> pa.Table:
    """pid/tid of the waiting rows `rows` from their launch anywhere in the file."""
    pid, tid = table.column("pid").to_numpy().copy(), table.column("tid").to_numpy().copy()
    pos, found = launches.find(table.column("corr").to_numpy()[rows])
    pid[rows[found]], tid[rows[found]] = launches.pid[pos[found]], launches.tid[pos[found]]
    for name, col in (("pid", pid), ("tid", tid)):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, table.schema.field(name), pa.array(col, table.schema.field(name).type))
    return table


class Unmergeable(Exception):
    """The ranges cannot give the whole parse's rows (the message says why): parse the file."""


Load = Callable[[int, "list[str] | None"], pa.Table]  # range number, columns (None: all) -> its rows
HOST_COLUMNS = ["kind", "corr", "pid", "tid"]


def _range_order(t: pa.Table, o: RangeOutcome, k: int, before: int, launches: Launches) -> tuple[pa.Table, pa.Table]:
    """Range k's rows as (those in their place, those that wait to the end of the file). A
    range's waiting rows whose launch is in an earlier range did not wait in the whole
    parse: they go back among the range's rows by traceEvents index (the order of a range's
    rows when it has no B/E or C event)."""
    rows = np.arange(o.waiting_from, t.num_rows)
    if before:
        t = _with_locs(t, _indices(t) + before)
    if not len(rows):
        return t, t.slice(0, 0)
    t = _placed(t, rows, launches)
    pos, found = launches.find(t.column("corr").to_numpy()[rows])
    back = rows[found & (launches.range[pos] < k)]
    if not len(back):
        return t.slice(0, o.waiting_from), t.slice(o.waiting_from)
    head, index = np.arange(o.waiting_from), _indices(t)
    if o.range_events or o.counter_events:
        raise Unmergeable(f"range {k + 1} has B/E or C events and rows launched in an earlier range")
    if (np.diff(index[head]) <= 0).any():
        raise Unmergeable(f"range {k + 1}'s rows are not in traceEvents order")
    head = np.concatenate([head, back])
    head = head[np.argsort(index[head], kind="stable")]
    return t.take(pa.array(head)), t.take(pa.array(np.setdiff1d(rows, back)))


def merge(load: Load, outcomes: list[RangeOutcome], on_batch: Callable) -> ParseReport:
    """The ranges' rows (range by range, from `load`) to `on_batch` in the whole parse's
    order; the whole file's report. Raises Unmergeable (maybe after some batches: the caller
    drops them) when the whole file must be parsed instead."""
    why = consistent(outcomes)
    if why:
        raise Unmergeable(why)
    launches = Launches.of([load(k, HOST_COLUMNS) for k in range(len(outcomes))])
    if launches is None:
        raise Unmergeable("a correlation id is launched in two ranges")
    tails, before = [], 0
    for k, o in enumerate(outcomes):
        head, tail = _range_order(load(k, None), o, k, before, launches)
        before += o.trace_events
        for batch in head.to_batches():
            on_batch(batch)
        tails.append(tail)
    for tail in tails:  # the rows still waiting at the end of the file, in file order
        for batch in tail.to_batches():
            on_batch(batch)
    return merged_report(outcomes)
