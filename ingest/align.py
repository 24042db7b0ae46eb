"""One clock for every artifact of a trace, and a record of how it was decided.

Each parser states its clock as an ingest.clock.Clock (kept in report.meta["clock"]):

* "unix"      ns since the epoch. Artifacts with exact unix times anchor the trace: their
              overall [first, last] is the trace range. A unix artifact whose reading made
              an assumption (meta flags `year_assumed`: syslog lines without a year;
              `date_assumed`: a time of day only, e.g. nvidia-smi dmon; `tz_assumed`:
              local time without a zone, read as UTC) is moved by whole years, days or
              quarter hours when that places it inside the trace range.
* "monotonic" ns on a host clock since boot (perf, bpftrace); "relative": ns since the
              capture started (perf trace). They are shifted by an offset: the user's
              (below), else the capture's own reference (meta clock `offset_ns`, e.g. perf's
              header "reference time"); without one they stay on their own clock, flagged.
* "none"      no timestamps (topology dumps, summaries, logs without times): rows are put
              at the start of the trace range in file order, 1 ns apart, flagged.

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

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ingest.clock import Clock
from ingest.events import ParseError

DAY_NS = 86_400 * 10**9
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


def read_clock_offsets(path: Path | str, name: str) -> dict[str, int]:
    """Parse tracedoc-clock.json; a malformed file is a ParseError naming the key."""
    data = Path(path).read_bytes()[:MAX_CLOCK_FILE + 1]
    if len(data) > MAX_CLOCK_FILE:
        raise ParseError(name, "byte 0", f"a clock file of at most {MAX_CLOCK_FILE:,} bytes")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ParseError(name, f"line {e.lineno}, column {e.colno}", f"valid JSON ({e.msg})") from None
    offsets = doc.get("offsets_ns") if isinstance(doc, dict) else None
    if not isinstance(offsets, dict):
        raise ParseError(name, "offsets_ns", 'an object {"offsets_ns": {"artifact name": integer ns}}')
    for key, value in offsets.items():
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) >= 2**63:
            raise ParseError(name, f"offsets_ns[{key!r}]", "an integer number of nanoseconds")
    return dict(offsets)


def plan_alignment(tables: dict[str, pa.Table], metas: dict[str, dict],
                   clock_offsets: dict[str, int] | None = None) -> dict[str, Alignment]:
    ranges = {name: _range(t) for name, t in tables.items()}
    clocks = {name: Clock.from_meta(metas.get(name)) for name in tables}
    exact = [r for n, r in ranges.items() if r and clocks[n].domain == "unix" and not clocks[n].assumptions]
    anchor = (min(r[0] for r in exact), max(r[1] for r in exact)) if exact else None
    user = _user_offsets(clock_offsets or {}, list(tables))
    plans = {}
    for name in tables:
        clock, rng = clocks[name], ranges[name]
        domain = clock.domain
        if name in user:
            method = "user offset (tracedoc-clock.json / labels)"
            if domain == "none":
                method += ", rows in file order 1 ns apart"
            plans[name] = Alignment(name, domain, user[name], method, True)
        elif domain == "unix":
            plans[name] = _unix(name, clock, rng, anchor)
        elif domain in ("monotonic", "relative"):
            if clock.offset_ns is not None:
                plans[name] = Alignment(name, domain, clock.offset_ns,
                                        clock.offset_source or "the capture's own clock reference", True)
            else:
                plans[name] = Alignment(name, domain, 0, f"left on its own {domain} clock (no offset given: see "
                                                         "tracedoc-clock.json in the docs); not comparable with "
                                                         "wall-clock artifacts", False)
        elif domain == "none" and anchor:
            plans[name] = Alignment(name, domain, anchor[0], "no timestamps: placed at the trace start in file "
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


def _range(table: pa.Table) -> tuple[int, int] | None:
    if not table.num_rows:
        return None
    mm = pc.min_max(table.column("ts"))
    return mm["min"].as_py(), mm["max"].as_py()


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


def _unix(name: str, clock: Clock, rng, anchor) -> Alignment:
    flags = clock.assumptions
    if not flags:
        return Alignment(name, "unix", 0, "wall clock as recorded", True)
    if not rng or not anchor:
        return Alignment(name, "unix", 0, f"wall clock with {', '.join(flags)}; nothing exact to check it against",
                         True)
    candidates = {0}
    if clock.year_assumed:
        candidates |= {_year_shift(rng[0], y) for y in {_year(anchor[0]), _year(anchor[1])}}
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
                                         "the whole-year/day/quarter-hour shift that best places it inside the "
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
