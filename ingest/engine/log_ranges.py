"""One big text log parsed as byte ranges by several workers, merged into the events one
parse of the whole file gives (same rows, same order, same line numbers).

The log parser carries state from line to line (the open multi-line record, the inherited
time, the last errors for echo detection, the last traceback for chained ones). A range
therefore starts parsing `warm_start` bytes earlier, throws away what those warm-up lines
emit, and notes a digest of its state when it reaches its first own line; it notes the same
digest when it reaches the first line of the next range. When every range's start digest is
the digest its predecessor ended with, each range saw exactly the state the single parse
had there, so its rows are the single parse's rows for those lines (the parser is
deterministic). What the parser keeps from the last traceback for a chained one (STICKY)
may date from anywhere before: it is compared only when the range read it before writing it.
When a digest or a read sticky value differs (the warm-up was too short to rebuild the
state), the caller parses the whole file instead: slower, never different.

What the parser keeps for the whole file is merged, not compared: watchdog timeouts are held
to the end of the file and completed with the process-group state seen anywhere in it, the
clock notes whether any line was stamped, warnings keep their first-50 cap.

Only plain (not gzip) text logs are split: a gzip stream cannot be entered mid-way.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ingest.engine.events import EventLimitReached, EventSink, ParseReport
from ingest.engine.io import is_gzip
from ingest.engine.parse import event_file, events_allowed
from ingest.engine.parsers.logs.blocks import Line
from ingest.engine.parsers.logs.parser import FORMAT, REPEAT_WINDOW, SOURCE, LogParser

SCAN_CHUNK = 64 << 20
SUPPRESSED = "further warnings suppressed"


@dataclass(frozen=True)
class LineRange:
    """Bytes [start, end) of a file, starting at line `first_line` (1-based); parsing starts
    at `warm_start` (line `warm_line`) to rebuild the parser's state."""
    start: int
    end: int
    first_line: int
    warm_start: int
    warm_line: int
    last: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> "LineRange":
        return cls(**{k: d[k] for k in ("start", "end", "first_line", "warm_start", "warm_line", "last")})


class JsonCarried:
    """A dataclass a part's worker hands to the merge as JSON text (stdlib JSON)."""

    def to_json(self) -> str:
        return json.dumps(self.__dict__, default=str)

    @classmethod
    def from_json(cls, text: str):
        return cls(**json.loads(text))


@dataclass
class RangeOutcome(JsonCarried):
    """What parsing one range gave; `to_json`/`from_json` carry it from the part's worker to
    the merge (stdlib JSON: NaN values and int keys of held rows survive as the single parse
    would write them)."""
    events: int = 0
    warnings: list[str] = field(default_factory=list)
    start_digest: str = ""
    end_digest: str = ""
    start_sticky: dict = field(default_factory=dict)   # STICKY values the range started with (warm-up)
    end_sticky: dict = field(default_factory=dict)     # ... and ended with
    sticky_read: list[str] = field(default_factory=list)  # STICKY fields it read before writing them
    timeouts: list[dict] = field(default_factory=list)
    pg_state: list = field(default_factory=list)   # [[key], {state}] in the order first seen
    stamped: bool = False
    year_assumed: bool = False
    error: str = ""
    seconds: float = 0.0
    limited: bool = False   # stopped at the per-artifact event bound (ingest.engine.parse.events_allowed)
    head: list[str] = field(default_factory=list)  # the first range's first non-empty lines (structured_guess)


def splittable(path: Path) -> bool:
    return not is_gzip(Path(path))


def plan_ranges(path: Path, part_bytes: int, warmup_bytes: int) -> list[LineRange]:
    """Ranges of about `part_bytes`, cut after a newline, each with the line it starts at and
    a warm-up of about `warmup_bytes` before it (one pass over the file, by mmap)."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        return [LineRange(0, 0, 1, 0, 1, True)]
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        starts = [0]
        while starts[-1] + part_bytes < size:
            nl = mm.find(b"\n", starts[-1] + part_bytes)
            if nl < 0 or nl + 1 >= size:
                break
            starts.append(nl + 1)
        warms = [0] + [_line_start_before(mm, s, warmup_bytes) for s in starts[1:]]
        lines = _line_numbers(mm, sorted(set(starts) | set(warms)))
    ends = starts[1:] + [size]
    return [LineRange(s, e, lines[s], w, lines[w], i == len(starts) - 1)
            for i, (s, e, w) in enumerate(zip(starts, ends, warms))]


def _line_start_before(mm: mmap.mmap, start: int, back: int) -> int:
    if back <= 0 or start == 0:
        return start
    nl = mm.rfind(b"\n", 0, max(0, start - back))
    return nl + 1 if nl >= 0 else 0


def _line_numbers(mm: mmap.mmap, offsets: list[int]) -> dict[int, int]:
    """Line number (1-based) of the line starting at each offset: newlines counted before it."""
    out, count, pos = {}, 0, 0
    for off in offsets:
        while pos < off:
            step = min(off, pos + SCAN_CHUNK)
            count += mm[pos:step].count(b"\n")
            pos = step
        out[off] = count + 1
    return out


# Kept from the last traceback until the next one, however far: read only when a chained
# exception follows ("During handling of the above exception..."). Compared only where a range
# read one before writing it (`_RangeParser`), or one traceback early in a file would make
# every later range's warm-up "too short".
STICKY = ("last_traceback_loc", "last_thread", "last_error", "kv_limits")


def state_digest(p: LogParser, next_line: int) -> str:
    """The parser state that decides the rows of the lines from `next_line` on, but for the
    STICKY fields. Echo-detection entries older than its window can never match again and are
    left out (the parser drops them only when the next error line comes, so two equal states
    may still hold them)."""
    recent = sorted((repr(k), list(v)) for k, v in p.recent_errors.items() if next_line - v[0] <= REPEAT_WINDOW)
    held = (p.held_oom.lines[0].no, p.held_oom.lines[-1].no) if p.held_oom is not None else None
    state = (p.last_ts, p.stamped, repr(p.block), p.chained_after, p.thread, recent, repr(p.wrap), held)
    return hashlib.sha256(repr(state).encode()).hexdigest()


def _sticky_property(field_name: str) -> property:
    def get(self):
        if self._tracking and field_name not in self._written:
            self.read_before_written.add(field_name)
        return self.__dict__["_" + field_name]

    def set(self, value):
        if self._tracking:
            self._written.add(field_name)
        self.__dict__["_" + field_name] = value
    return property(get, set)


class _RangeParser(LogParser):
    """The log parser, noting which STICKY fields a range read before it wrote them (those
    values came from before the range and must be the single parse's)."""
    last_traceback_loc = _sticky_property("last_traceback_loc")
    last_thread = _sticky_property("last_thread")
    last_error = _sticky_property("last_error")
    kv_limits = _sticky_property("kv_limits")

    def __init__(self, *args, **kwargs):
        self._tracking, self._written, self.read_before_written = False, set(), set()
        super().__init__(*args, **kwargs)

    def track(self) -> None:
        self._tracking = True

    def sticky(self) -> dict:
        return {f: self.__dict__["_" + f] for f in STICKY}


class _Discard:
    def __call__(self, batch) -> None:
        pass


def parse_range(path: Path, rng: LineRange, name: str, year: int, on_batch: Callable,
                progress: Callable[[int], None] | None = None) -> RangeOutcome:
    """The rows of the lines of `rng` (to `on_batch`), with the digests and held state the
    merge needs. Warm-up lines feed the parser but their rows and warnings are dropped."""
    warm_report, report = ParseReport(format=FORMAT), ParseReport(format=FORMAT)
    limit, setting = events_allowed(FORMAT)  # no range may cost more than the whole file may
    sink = EventSink(name, SOURCE, on_batch, limit=limit, limit_setting=setting)
    parser = _RangeParser(EventSink(name, SOURCE, _Discard()), warm_report, year)
    out = RangeOutcome()
    started = time.perf_counter()
    pos, no, own = rng.warm_start, rng.warm_line, False
    try:
        with open(path, "rb") as f:
            f.seek(rng.warm_start)
            for raw in f:
                if pos >= rng.end:
                    break
                if not own and pos >= rng.start:
                    own = True
                    parser.sink.flush()
                    parser.sink, parser.report = sink, report
                    parser.timeouts, parser.pg_state = [], {}
                    out.start_digest, out.start_sticky = state_digest(parser, no), parser.sticky()
                    parser.track()
                parser.feed(Line(no, parser._decode(raw, no), None, 0))  # type: ignore[arg-type]
                pos += len(raw)
                no += 1
                if progress is not None and no % 8192 == 0:
                    progress(pos - rng.start)
        if not own:  # an empty range (the empty file)
            parser.sink, parser.report = sink, report
            parser.timeouts, parser.pg_state = [], {}
            out.start_digest, out.start_sticky = state_digest(parser, no), parser.sticky()
            parser.track()
        out.end_digest, out.end_sticky = state_digest(parser, no), parser.sticky()
        parser._release_net(retried=False)  # a socket failure held for its next line is this range's row
        if rng.last:
            parser._flush_wrap()
            parser._close_block()
            parser._flush_wrap()
            parser._release_oom()  # else the next range, whose warm-up holds it too, decides it
    except EventLimitReached:
        out.limited = True  # the merge falls back to the single parse, which stops where the bound says
    sink.flush()
    out.events = sink.count
    out.warnings = list(report.warnings)
    out.timeouts = parser.timeouts
    out.pg_state = [[list(k), v] for k, v in parser.pg_state.items()]
    out.stamped, out.year_assumed = parser.stamped, parser.year_assumed
    if rng.warm_start == 0:
        out.head = list(parser.head)
    out.sticky_read = sorted(parser.read_before_written)
    # held rows go through JSON to the merge: make them what that JSON gives back now, so the
    # range's own copy and the merge's never differ
    out.timeouts = json.loads(json.dumps(out.timeouts, default=str))
    out.seconds = round(time.perf_counter() - started, 3)
    return out


def parse_range_to_parquet(path: Path, rng: LineRange, out: Path, name: str, year: int,
                           progress: Callable[[int], None] | None = None) -> RangeOutcome:
    """parse_range into Parquet file `out`."""
    with event_file(out) as on_batch:
        return parse_range(path, rng, name, year, on_batch, progress)


def consistent(outcomes: list[RangeOutcome]) -> str:
    """"" when the ranges join up (each started in the state its predecessor ended in), else
    why not."""
    limit, setting = events_allowed(FORMAT)
    if any(o.limited for o in outcomes) or sum(o.events for o in outcomes) > limit:
        # the single parse keeps the first `limit` events and says where it stopped
        return f"the log holds more than {limit:,} events ({setting}): read by one worker up to that bound"
    for i, o in enumerate(outcomes):
        if o.error:
            return f"range {i + 1} failed: {o.error}"
        if i and o.start_digest != outcomes[i - 1].end_digest:
            return f"range {i + 1} started in another parser state than range {i} ended in (warm-up too short)"
        if i and any(_json(o.start_sticky.get(f)) != _json(outcomes[i - 1].end_sticky.get(f)) for f in o.sticky_read):
            return (f"range {i + 1} read {', '.join(o.sticky_read)} from before its start, which its warm-up "
                    f"did not rebuild (warm-up too short)")
    return ""


def _json(value) -> str:
    """Values as they cross JSON (a tuple read back is a list)."""
    return json.dumps(value, default=str)


def finish(outcomes: list[RangeOutcome], name: str, year: int, on_batch: Callable,
           year_source: str = "") -> ParseReport:
    """The part of the single parse that spans the whole file: the held watchdog timeouts
    (completed with every range's process-group state) as the last rows, the clock, the
    warnings. Returns the report of the whole file (`events` counts every range's rows)."""
    report = ParseReport(format=FORMAT)
    for o in outcomes:
        for w in o.warnings:
            if w != SUPPRESSED:
                report.warn(w)
    sink = EventSink(name, SOURCE, on_batch)
    parser = LogParser(sink, report, year, year_source)
    for o in outcomes:
        parser.timeouts.extend(o.timeouts)
        for key, state in o.pg_state:
            parser.pg_state.setdefault(tuple(key), {}).update(state)
    parser.stamped = any(o.stamped for o in outcomes)
    parser.year_assumed = any(o.year_assumed for o in outcomes)
    parser._emit_timeouts()
    parser.set_clock()
    parser.head = next((o.head for o in outcomes if o.head), [])
    parser._say_if_structured()
    sink.flush()
    report.events = sum(o.events for o in outcomes) + sink.count
    return report
