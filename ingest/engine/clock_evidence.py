"""What an upload says about when its files were written: the evidence ingest.engine.align places by.

Two kinds of evidence:

* `Span`: an artifact's time range on a clock we trust (full wall-clock timestamps, or the
  consensus of the year-less files when nothing has full dates). Only plausible times count:
  a wall-clock time before 2000 or after 2100 is a placeholder (0 for "not recorded") or a
  unit mix-up, never a date, so one such row cannot stretch the trace over decades.
* `SharedCollective`: one collective seen by two artifacts. A watchdog line in a rank's log
  ("WorkNCCL(SeqNum=6 ...) ran for 10002 milliseconds") was written `elapsed_ms` after the work
  was enqueued, and the flight-recorder dump has that work's enqueue time (`time_created_ns`)
  in epoch ns: the log's clock must put the line there, give or take the watchdog's polling.
"""
from __future__ import annotations

from dataclasses import dataclass

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ingest.engine.clock import Clock
from ingest.engine.events import INT64_MAX

PLAUSIBLE_NS = (946_684_800 * 10**9, 4_102_444_800 * 10**9)  # 2000-01-01 .. 2100-01-01 UTC
# the watchdog polls about once a second and the dump's enqueue time precedes the timer's
# start by the launch; a placement off by more than this is a different instant
SHARED_EVENT_TOLERANCE_NS = 60 * 10**9
MAX_SHARED_ROWS = 10_000  # collective rows read from one artifact's attrs (dumps hold ~2,000)


@dataclass(frozen=True)
class Span:
    label: str   # what the evidence is, as the report names it
    lo: int
    hi: int

    def gap(self, lo: int, hi: int) -> int:
        """ns between [lo, hi] and this span (0 when they overlap)."""
        return max(0, self.lo - hi, lo - self.hi)


@dataclass(frozen=True)
class SharedCollective:
    """A log's watchdog line and the dump entry of the same collective."""
    log_ts: int          # the watchdog line's time on the log's own clock
    expected_ts: int     # the dump's enqueue time + the elapsed time the line states
    label: str           # "ALLREDUCE seq 6 in nccl_trace_rank_0"


def time_range(table: pa.Table, bounds: tuple[int, int] | None) -> tuple[int, int] | None:
    """The table's first and last time, counting only times within `bounds` (ns, [lo, hi))."""
    ts = table.column("ts")
    if bounds is not None:
        ts = pc.filter(ts, pc.and_(pc.greater_equal(ts, bounds[0]), pc.less(ts, bounds[1])))
    if not len(ts):
        return None
    mm = pc.min_max(ts)
    return mm["min"].as_py(), mm["max"].as_py()


def range_bounds(clock: Clock) -> tuple[int, int] | None:
    """Which times of an artifact count for its range: on an exact wall clock the plausible
    dates; a wall clock read with a guessed year or date counts any time but 0 (rows before
    its first stamp); other clocks count every time."""
    if clock.domain != "unix":
        return None
    return PLAUSIBLE_NS if not clock.assumptions else (1, INT64_MAX)


def shared_collectives(log: pa.Table, dumps: dict[str, pa.Table]) -> list[SharedCollective]:
    """Watchdog timeouts of `log` matched with the same collective (seq, process group) in
    flight-recorder dumps: the dump of the same rank when there is one, else any rank's
    (every rank enqueues the same collective within its timeout)."""
    timeouts = _rows(log, "NCCLWatchdogTimeout")
    if not timeouts:
        return []
    enqueued: dict[tuple, list[tuple[int | None, int, str]]] = {}
    for name, table in dumps.items():
        for ts, attrs in _rows(table, None, kind="collective"):
            seq = attrs.get("collective_seq_id")
            if isinstance(seq, int) and ts > 0:
                enqueued.setdefault((seq, attrs.get("pg_id")), []).append((attrs.get("rank"), ts, name))
    shared = []
    for ts, attrs in timeouts:
        seq, elapsed = attrs.get("seq"), attrs.get("elapsed_ms") or attrs.get("timeout_ms")
        if not isinstance(seq, int) or not isinstance(elapsed, (int, float)):
            continue
        found = enqueued.get((seq, attrs.get("pg_id"))) or enqueued.get((seq, None)) or []
        same_rank = [f for f in found if f[0] == attrs.get("rank")]
        for _, created, dump in (same_rank or found)[:1]:
            shared.append(SharedCollective(ts, created + int(elapsed * 1e6),
                                           f"{attrs.get('op') or 'collective'} seq {seq} in {dump}"))
    return shared


def _rows(table: pa.Table, name: str | None, kind: str | None = None) -> list[tuple[int, dict]]:
    """(ts, attrs) of the rows with this name (or kind); attrs parsed only for those rows."""
    column, value = ("name", name) if name is not None else ("kind", kind)
    mask = pc.equal(table.column(column).cast(pa.string()), value)
    picked = table.filter(mask).slice(0, MAX_SHARED_ROWS)
    out = []
    for ts, text in zip(picked.column("ts").to_pylist(), picked.column("attrs").to_pylist()):
        try:
            attrs = orjson.loads(text or "{}")
        except orjson.JSONDecodeError:
            continue
        if isinstance(attrs, dict):
            out.append((ts, attrs))
    return out
