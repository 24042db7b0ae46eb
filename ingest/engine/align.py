"""One clock for every artifact of a trace, and a record of how it was decided.

Each parser states its clock as an ingest.engine.clock.Clock (kept in report.meta["clock"]):

* "unix"      ns since the epoch. Artifacts with exact unix times anchor the trace: their
              overall [first, last] plausible time is the trace range (ingest.engine.clock_evidence).
              Stamps without a year (glog `E1201 00:01:38`, syslog, vLLM; meta flag
              `year_assumed` holds the year the parser used and `year_source` why) take their
              year from evidence, never from a range they merely fit: the same collective in a
              flight-recorder dump (the watchdog line is written `elapsed` after the dump's
              enqueue time), else the other files' full dates within a day, else, when nothing
              has full dates, the year most of the year-less files were given. A file that no
              year places within a day of the others stays as read, unaligned, with a warning.
              `date_assumed` (a time of day only, e.g. nvidia-smi dmon) and `tz_assumed` (local
              time without a zone, read as UTC) are moved by whole days or quarter hours when
              that places the artifact inside the trace range.
* "monotonic" ns on a host clock since boot (perf, bpftrace); "relative": ns since the
              capture started (perf trace). They are shifted by an offset: the user's
              (below), else the capture's own reference (meta clock `offset_ns`, e.g. perf's
              header "reference time"); without one they stay on their own clock, flagged.
* "none"      no timestamps (topology dumps, summaries, logs without times): rows are put
              at the start of the trace range in file order, 1 ns apart, flagged.

Each plan names the evidence that placed the artifact; an unaligned artifact is left out of
the report's time span.

User offsets: a file `tracedoc-clock.json` in the upload (any folder of a bundle) maps
artifact names (bundle-relative, or a unique base name) to the ns to add to their ts:

    {"offsets_ns": {"cpu/tokenizer.perf-script.txt": 1795940300000000000}}

For a monotonic capture the offset is wall-clock minus monotonic at one instant (e.g.
`echo $(date +%s%N) $(cut -d' ' -f1 /proc/uptime)` on the host, or perf's `-k realtime`);
for perf trace it is the wall-clock time the trace started. bundle.expand() returns it in
Members.clock_offsets; the API may pass the same mapping in the upload's labels
("clock_offsets").
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ingest.engine.clock import Clock
from ingest.engine.clock_evidence import (SHARED_EVENT_TOLERANCE_NS, SharedCollective, Span, range_bounds, shared_collectives,
                                   time_range)
from ingest.engine.events import INT64_MAX, ParseError, describe, excerpt, json_error_got

DAY_NS = 86_400 * 10**9
YEAR_NS = 31_556_952 * 10**9  # the mean Gregorian year, for saying how far a file moved
QUARTER_HOUR_NS = 900 * 10**9
MAX_TZ_NS = 14 * 3600 * 10**9
MAX_CLOCK_FILE = 1 << 20


@dataclass
class Alignment:
    artifact: str
    domain: str
    offset_ns: int
    method: str
    aligned: bool
    evidence: str = ""  # what placed it (empty: its own full times, or nothing could)
    warning: str = ""   # shown on the artifact and in the report


def read_clock_offsets(path: Path | str, name: str) -> dict[str, int]:
    """Parse tracedoc-clock.json; a malformed file is a ParseError naming the key."""
    data = Path(path).read_bytes()[:MAX_CLOCK_FILE + 1]
    if len(data) > MAX_CLOCK_FILE:
        raise ParseError(name, "byte 0", f"a clock file of at most {MAX_CLOCK_FILE:,} bytes", got="a larger file")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ParseError(name, f"line {e.lineno}, column {e.colno}", "valid JSON",
                         got=json_error_got(data, e.pos, e.msg)) from None
    offsets = doc.get("offsets_ns") if isinstance(doc, dict) else None
    if not isinstance(offsets, dict):
        got = f"offsets_ns as {describe(offsets)}" if isinstance(doc, dict) and "offsets_ns" in doc else describe(doc)
        raise ParseError(name, "offsets_ns", 'an object {"offsets_ns": {"artifact name": integer ns}}', got=got)
    for key, value in offsets.items():
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) >= 2**63:
            raise ParseError(name, f"offsets_ns[{excerpt(key)}]", "an integer number of nanoseconds",
                             got=describe(value))
    return dict(offsets)


def plan_alignment(tables: dict[str, pa.Table], metas: dict[str, dict],
                   clock_offsets: dict[str, int] | None = None) -> dict[str, Alignment]:
    clocks = {name: Clock.from_meta(metas.get(name)) for name in tables}
    ranges = {name: time_range(t, range_bounds(clocks[name])) for name, t in tables.items()}
    exact = {n: Span(f"{n}'s full wall-clock times", *r) for n, r in ranges.items()
             if r and clocks[n].domain == "unix" and not clocks[n].assumptions}
    anchor = (min(s.lo for s in exact.values()), max(s.hi for s in exact.values())) if exact else None
    user = _user_offsets(clock_offsets or {}, list(tables))
    yearless = [n for n in tables if n not in user and clocks[n].domain == "unix" and clocks[n].year_assumed]
    consensus_year, reference = (None, exact) if exact else _yearless_consensus(yearless, clocks, ranges)

    def dated_anchor(but: str) -> tuple[int, int] | None:
        """Nothing has exact times: the other files' dates, with a guessed zone or year, are the best there is."""
        dated = [r for n, r in ranges.items()
                 if n != but and r and clocks[n].domain == "unix" and not clocks[n].date_assumed]
        return (min(lo for lo, _ in dated), max(hi for _, hi in dated)) if dated else None
    dumps = {n: tables[n] for n in exact if "pg_config" in (metas.get(n) or {})}  # flight-recorder dumps
    plans = {}
    for name in tables:
        clock, rng = clocks[name], ranges[name]
        domain = clock.domain
        if name in user:
            method = "user offset (tracedoc-clock.json / labels)"
            if domain == "none":
                method += ", rows in file order 1 ns apart"
            plans[name] = Alignment(name, domain, user[name], method, True, evidence="tracedoc-clock.json / labels")
        elif name in yearless:
            others = {n: s for n, s in reference.items() if n != name}
            plans[name] = _place_yearless(name, clock, rng, others, shared_collectives(tables[name], dumps),
                                          consensus_year)
        elif domain == "unix":
            plans[name] = _unix(name, clock, rng, anchor or dated_anchor(name),
                                alone=sum(1 for r in ranges.values() if r) <= 1)
        elif domain in ("monotonic", "relative"):
            if clock.offset_ns is not None:
                source = clock.offset_source or "the capture's own clock reference"
                plans[name] = Alignment(name, domain, clock.offset_ns, source, True, evidence=source)
            else:
                plans[name] = Alignment(name, domain, 0, f"left on its own {domain} clock (no offset given: see "
                                                         "tracedoc-clock.json in the docs); not comparable with "
                                                         "wall-clock artifacts", False)
        elif domain == "none" and (start := anchor or dated_anchor(name)):
            plans[name] = Alignment(name, domain, start[0], "no timestamps: placed at the trace start in file "
                                                            "order, 1 ns apart", True)
        else:
            plans[name] = Alignment(name, domain, 0, "no clock to align to" if domain == "none"
                                    else "clock domain not stated by the parser: kept as is", False)
    return plans


def align_tables(tables: dict[str, pa.Table], metas: dict[str, dict],
                 clock_offsets: dict[str, int] | None = None) -> dict[str, pa.Table]:
    return apply_alignment(tables, plan_alignment(tables, metas, clock_offsets))


def apply_alignment(tables: dict[str, pa.Table], plans: dict[str, Alignment]) -> dict[str, pa.Table]:
    """Each table with its planned offset added to `ts` (or file-order times where it had none)."""
    out = {}
    for name, table in tables.items():
        plan = plans[name]
        index = table.schema.get_field_index("ts")
        if plan.domain == "none" and plan.aligned:
            ts = pa.array(plan.offset_ns + np.arange(table.num_rows, dtype=np.int64), type=pa.int64())
            table = table.set_column(index, "ts", ts)
        elif plan.offset_ns:
            table = table.set_column(index, "ts", pc.add(table.column(index), pa.scalar(plan.offset_ns, pa.int64())))
        out[name] = table
    return out


def describe_alignment(tables: dict[str, pa.Table], metas: dict[str, dict],
                       clock_offsets: dict[str, int] | None = None) -> list[dict]:
    """For the report: artifact, clock domain, offset applied (ns), how it was decided."""
    return describe_plans(plan_alignment(tables, metas, clock_offsets))


def describe_plans(plans: dict[str, Alignment]) -> list[dict]:
    return [asdict(p) for p in plans.values()]


def _yearless_consensus(names: list[str], clocks: dict[str, Clock], ranges: dict) -> tuple[int | None, dict[str, Span]]:
    """Nothing has full dates: the year-less files agree on the year most of them were given
    (the latest of equals); that year and those files are the reference, weak evidence, and said so."""
    years = Counter(clocks[n].year_assumed for n in names if ranges[n] and _plausible_year(clocks[n].year_assumed))
    if not years:
        return None, {}
    year = max(years, key=lambda y: (years[y], y))
    return year, {n: Span(f"{n}'s year ({clocks[n].year_source or 'assumed'})", *ranges[n])
                  for n in names if clocks[n].year_assumed == year and ranges[n]}


def _place_yearless(name: str, clock: Clock, rng, reference: dict[str, Span],
                    shared: list[SharedCollective], consensus_year: int | None = None) -> Alignment:
    """Stamps without a year take the year the upload's other evidence gives, never one
    that merely fits a range: the same collective in a dump first, else the other files'
    dates within a day (or, where nothing has full dates, the year most year-less files were
    given); what cannot be decided stays as read, with a warning."""
    year = clock.year_assumed
    assert year is not None  # the files placed here are those read with an assumed year
    said = f"time stamps without a year, read as {year} ({clock.year_source or 'assumed'})"
    if not rng:
        return Alignment(name, "unix", 0, f"{said}; no plausible times", True)
    years = {year} | {y + d for s in reference.values() for y in (_year(s.lo), _year(s.hi)) for d in (-1, 0, 1)}
    offsets = sorted({_year_shift(rng[0], y) for y in years}, key=abs)
    if shared:
        def miss(off: int) -> int:
            """The median over collectives of each one's closest watchdog line (a timeout is
            restated by later lines: the teardown, the exception)."""
            closest: dict[str, int] = {}
            for s in shared:
                closest[s.label] = min(closest.get(s.label, INT64_MAX), abs(s.log_ts + off - s.expected_ts))
            return sorted(closest.values())[len(closest) // 2]
        best = min(offsets, key=miss)
        if miss(best) <= SHARED_EVENT_TOLERANCE_NS:
            return _placed(name, best, said, f"{shared[0].label} (the watchdog line falls "
                                             f"{miss(best) / 1e9:.1f} s from its enqueue time + elapsed)")
    if not reference:
        return Alignment(name, "unix", 0, f"{said}; nothing in the upload to check the year against", True,
                         evidence=clock.year_source or "assumed")
    if year == consensus_year:
        return Alignment(name, "unix", 0, f"{said}; kept: the year most of the upload's year-less files were given "
                                          "(nothing in it has full dates)", True, evidence="the year-less files' year")

    def gap(off: int) -> tuple[int, Span]:
        return min(((s.gap(rng[0] + off, rng[1] + off), s) for s in reference.values()), key=lambda g: g[0])
    best = min(offsets, key=lambda off: gap(off)[0])
    distance, nearest = gap(best)
    warning = ""
    if shared:
        warning = (f"{name}: the watchdog line of {shared[0].label} does not match that dump's time "
                   f"under any year; the year comes from the other files instead")
    if distance <= DAY_NS:
        plan = _placed(name, best, said, nearest.label)
        plan.warning = warning
        return plan
    return Alignment(name, "unix", 0, f"{said}; left as read: under no year does it fall within a day of the "
                                      "other files", False,
                     warning=f"{name}: its time stamps carry no year and nothing in the upload places them within "
                             f"a day of the other files (nearest, {nearest.label}, is {distance / DAY_NS:.0f} days "
                             f"away); it is left on its own clock, not compared with the others")


def _placed(name: str, offset: int, said: str, evidence: str) -> Alignment:
    moved = f"moved {offset / YEAR_NS:+.0f} year(s)" if offset else "kept"
    return Alignment(name, "unix", offset, f"{said}; {moved} by {evidence}", True, evidence=evidence)
def _user_offsets(offsets: dict[str, int], names: list[str]) -> dict[str, int]:
    """Keys are artifact names, or base names that match exactly one artifact."""
    by_base: dict[str, list[str]] = {}
    for n in names:
        by_base.setdefault(PurePosixPath(n).name, []).append(n)
    resolved = {}
    for key, value in offsets.items():
        if key in names:
            resolved[key] = value
        elif len(by_base.get(key, [])) == 1:
            resolved[by_base[key][0]] = value
    return resolved


def _unix(name: str, clock: Clock, rng, anchor, alone: bool = True) -> Alignment:
    flags = clock.assumptions
    if not flags:
        return Alignment(name, "unix", 0, "wall clock as recorded", True)
    if rng and not anchor and clock.date_assumed:
        # a time of day with no date anywhere in the upload: its 1970-01-01 is no date
        return Alignment(name, "unix", 0, "a time of day only, and nothing in the upload says the date: left on its "
                                          "own clock", False,
                         warning="" if alone else f"{name}: times of day only, and no other file says the date: left "
                                                  "on its own clock, not compared with the others")
    if not rng or not anchor:
        return Alignment(name, "unix", 0, f"wall clock with {', '.join(flags)}; nothing exact to check it against",
                         True)
    candidates = {0}
    if clock.date_assumed:
        k = (anchor[0] - rng[0]) // DAY_NS
        candidates |= {c + d * DAY_NS for c in candidates for d in (k - 1, k, k + 1)}
    if clock.tz_assumed:
        quarters = range(-MAX_TZ_NS // QUARTER_HOUR_NS, MAX_TZ_NS // QUARTER_HOUR_NS + 1)
        candidates |= {c + q * QUARTER_HOUR_NS for c in candidates for q in quarters}
    best = max(sorted(candidates, key=abs), key=lambda off: _overlap(rng, off, anchor))
    if _overlap(rng, best, anchor) <= _overlap(rng, 0, anchor) or _overlap(rng, best, anchor) == 0:
        return Alignment(name, "unix", 0, f"wall clock with {', '.join(flags)}; kept (no shift fits the trace "
                                          "range better)", True)
    return Alignment(name, "unix", best, f"wall clock with {', '.join(flags)}: shifted by {best / 1e9:+.0f} s, "
                                         "the whole-day/quarter-hour shift that best places it inside the "
                                         "trace range", True)


def _overlap(rng, offset: int, anchor) -> float:
    lo, hi = rng[0] + offset, rng[1] + offset
    if hi == lo:
        return 1.0 if anchor[0] <= lo <= anchor[1] else 0.0
    return max(0, min(hi, anchor[1]) - max(lo, anchor[0])) / (hi - lo)


def _year(ns: int) -> int:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).year


def _year_shift(ns: int, year: int) -> int:
    dt = datetime.fromtimestamp(ns // 10**9, tz=timezone.utc)
    try:
        moved = dt.replace(year=year)
    except ValueError:  # 29 February
        moved = dt.replace(year=year, day=28)
    return int((moved - dt).total_seconds()) * 10**9


def _plausible_year(year: int | None) -> bool:
    return year is not None and 2000 <= year < 2100
