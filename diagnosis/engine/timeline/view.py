"""One view of the timeline with server-side level of detail (pure: no Django, no I/O).

`view(index, start_ns, end_ns, max_items)` answers at most `max_items` items however many
events the range holds. The budget is shared among the lanes with events in the range (a
lane needing fewer than its share gives the rest to the others); a lane with more events than
its budget is cut into that many equal slices of the range, and the events of each slice are
merged into one span (first start, last end, the count, the busy time) or, on a curve, one
point (the mean, with the minimum and maximum). Each lane costs two binary searches plus
work in proportion to its events in the range, all in numpy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc

from diagnosis.engine.timeline.index import CURVE, TimelineIndex

DEFAULT_MAX_ITEMS = 2000
MAX_ITEMS_LIMIT = 20_000


@dataclass(frozen=True)
class View:
    """Item times are ns after `origin_ns` (the trace's first time): absolute epoch ns exceed
    what a JavaScript number holds exactly; `start_ns`/`end_ns` stay absolute."""
    origin_ns: int
    trace_end_ns: int
    start_ns: int
    end_ns: int
    max_items: int
    lanes: list[dict]
    items: list[dict]
    merged: bool

    def to_dict(self) -> dict:
        return {"origin_ns": self.origin_ns, "origin": str(self.origin_ns), "trace_end_ns": self.trace_end_ns,
                "start_ns": self.start_ns, "end_ns": self.end_ns, "max_items": self.max_items,
                "lanes": self.lanes, "items": self.items, "merged": self.merged}


def _first_overlapping(index: TimelineIndex, s: int, e: int, start_ns: int) -> int:
    """The first row of the lane [s, e) that may end at or after start_ns: before it every row
    ended (the running maximum of the ends is sorted, so one binary search finds it). "At":
    a zero-length event at start_ns ends there and is in the view."""
    return s + int(np.searchsorted(index.run_end[s:e], start_ns, side="left"))


def share_budget(counts: list[int], budget: int) -> list[int]:
    """Water-filling: each lane gets min(its count, an equal share of what is left), lanes
    with small counts first, so the sum never exceeds `budget`."""
    out = [0] * len(counts)
    left, remaining = budget, sum(1 for c in counts if c)
    for i in sorted(range(len(counts)), key=lambda i: counts[i]):
        if not counts[i]:
            continue
        share = max(left // remaining, 0) if remaining else 0
        out[i] = min(counts[i], share)
        left -= out[i]
        remaining -= 1
    return out


def view(index: TimelineIndex, start_ns: int | None = None, end_ns: int | None = None,
         max_items: int = DEFAULT_MAX_ITEMS) -> View:
    start = int(index.start_ns if start_ns is None else start_ns)
    end = int(index.end_ns + 1 if end_ns is None else end_ns)  # the range is half-open: keep the last event
    end = max(end, start + 1)
    max_items = max(1, min(int(max_items), MAX_ITEMS_LIMIT))
    bands = [b for b in index.bands if b.ts < end and b.ts + max(b.dur, 1) > start]
    budget = max(max_items - len(bands), 0)
    bands = bands[:max_items]

    ranges, counts = [], []
    for lane in index.lanes:
        s, e = int(index.offsets[lane.id]), int(index.offsets[lane.id + 1])
        lo = _first_overlapping(index, s, e, start) if e > s else s
        hi = s + int(np.searchsorted(index.ts[s:e], end, side="left")) if e > s else s
        ranges.append((lo, hi))
        counts.append(max(hi - lo, 0))  # an upper bound: nested rows before `start` may have ended
    budgets = share_budget(counts, budget)

    items: list[dict] = [{"lane": b.lane, "ts": b.ts, "dur": b.dur, "kind": b.kind, "name": b.title,
                          "ref": b.ref, "severity": b.severity, "count": 1} for b in bands]
    merged_any = False
    lane_rows = []
    for lane, (lo, hi), n, share in zip(index.lanes, ranges, counts, budgets):
        lane_rows.append(lane.to_dict(index.events_in(lane.id)))
        if not n or not share:
            merged_any = merged_any or bool(n)
            continue
        if lane.type == CURVE:
            new, merged = _curve(index, lane.id, lo, hi, start, end, share)
        else:
            new, merged = _spans(index, lane.id, lo, hi, start, end, share)
        items.extend(new)
        merged_any = merged_any or merged
    for item in items:
        item["ts"] -= index.start_ns
    return View(index.start_ns, index.end_ns, start, end, max_items, lane_rows, items, merged_any)


def _singles(index: TimelineIndex, lane: int, rows: np.ndarray) -> list[dict]:
    if not len(rows):
        return []
    frame_rows = index.row[rows]
    known = frame_rows >= 0
    # only rows with a frame row have a file and a location: a per-step latency point has none
    # (-1), and with no stored events there is no row 0 to stand in for it
    locs: list = [None] * len(rows)
    artifacts: list = [None] * len(rows)
    at = np.flatnonzero(known)
    if len(at):
        for i, loc, artifact in zip(at.tolist(), index.locs.take(frame_rows[at]).to_pylist(),
                                    index.artifact_names[index.artifact[frame_rows[at]]].tolist()):
            locs[i], artifacts[i] = loc, artifact
    values = index.value[rows]
    has_value = (~np.isnan(values)).tolist()
    columns = zip(index.ts[rows].tolist(), (index.end[rows] - index.ts[rows]).tolist(),
                  index.names[index.name[rows]].tolist(), index.kind[rows].tolist(), frame_rows.tolist(),
                  known.tolist(), artifacts, locs, values.tolist(), has_value, index.corr[rows].tolist())
    out = []
    for t, d, name, kind, row, is_known, artifact, loc, value, valued, corr in columns:
        item = {"lane": lane, "ts": t, "dur": d, "name": str(name), "kind": index.kinds[kind], "count": 1, "row": row}
        if is_known:
            item["artifact"], item["loc"] = str(artifact), loc
        if valued:
            item["value"] = value
        if corr >= 0:   # a launch and the GPU work it enqueued share it (the page draws an arrow)
            item["corr"] = corr
        out.append(item)
    return out


def _slice_starts(ts: np.ndarray, start: int, end: int, n: int) -> np.ndarray:
    """Where each of n equal slices of [start, end) begins in the sorted times `ts`, for the
    slices that hold at least one row: n binary searches, no pass over the rows."""
    edges = start + (np.arange(1, n, dtype=np.float64) * ((end - start) / n)).astype(np.int64)
    bounds = np.empty(n, np.int64)
    bounds[0] = 0
    bounds[1:] = np.searchsorted(ts, edges, side="left")
    bounds = bounds[bounds < len(ts)]
    return bounds[np.r_[True, bounds[1:] != bounds[:-1]]]   # sorted: drop the repeats of empty slices


def _spans(index: TimelineIndex, lane: int, lo: int, hi: int, start: int, end: int,
           share: int) -> tuple[list[dict], bool]:
    live = lo + np.flatnonzero((index.end[lo:hi] > start) | (index.ts[lo:hi] >= start)) if hi - lo <= 4 * share else None
    if live is not None and len(live) <= share:   # nested rows that ended before the view left out
        return _singles(index, lane, live), False
    ts, ends = index.ts[lo:hi], index.end[lo:hi]
    first = _slice_starts(ts, max(start, int(ts[0])), end, share)
    counts = np.diff(np.r_[first, len(ts)])
    last_end = np.maximum.reduceat(ends, first)
    durations = ends - ts
    busy = np.add.reduceat(durations, first)
    # the name of the longest event in each slice says what the slice mostly is
    longest = lo + _argmax_per_group(durations, first)
    names = index.names[index.name[longest]]
    kinds = index.kind[longest]
    items = []
    columns = zip(first.tolist(), counts.tolist(), ts[first].tolist(), (last_end - ts[first]).tolist(),
                  names.tolist(), kinds.tolist(), busy.tolist())
    for f, count, t, d, name, kind, busy_ns in columns:
        if count == 1:
            items.extend(_singles(index, lane, np.array([lo + f])))
            continue
        items.append({"lane": lane, "ts": t, "dur": d, "name": str(name), "kind": index.kinds[kind],
                      "count": count, "busy_ns": busy_ns})
    return items, True


def _argmax_per_group(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The index of the (first) largest value in each run values[first[i]:first[i+1]], in O(n)."""
    counts = np.diff(np.r_[first, len(values)])
    top = np.repeat(np.maximum.reduceat(values, first), counts)
    hits = np.flatnonzero(values == top)
    group = np.repeat(np.arange(len(first)), counts)[hits]
    return hits[np.r_[True, group[1:] != group[:-1]]]


def _curve(index: TimelineIndex, lane: int, lo: int, hi: int, start: int, end: int,
           share: int) -> tuple[list[dict], bool]:
    if hi - lo <= share:
        return _singles(index, lane, np.arange(lo, hi)), False
    ts, values = index.ts[lo:hi], index.value_or_zero[lo:hi]
    first = _slice_starts(ts, max(start, int(ts[0])), end, share)
    counts = np.diff(np.r_[first, len(ts)])
    mean = np.add.reduceat(values, first) / counts
    low = np.minimum.reduceat(values, first)
    high = np.maximum.reduceat(values, first)
    name = str(index.names[index.name[lo]])
    kind = index.kinds[index.kind[lo]]
    # whole columns to Python at once: per-element numpy scalars cost ~50 µs an item here
    columns = zip(ts[first].tolist(), counts.tolist(), np.round(mean, 4).tolist(), low.tolist(), high.tolist())
    return [{"lane": lane, "ts": t, "dur": 0, "name": name, "kind": kind, "count": c, "value": m, "min": lo_, "max": hi_}
            for t, c, m, lo_, hi_ in columns], True


@dataclass(frozen=True)
class Located:
    """Where an evidence row (artifact + location) sits on the timeline."""
    lane: int
    ts: int          # ns after the trace's origin
    dur: int
    row: int
    name: str

    def to_dict(self) -> dict:
        return {"lane": self.lane, "ts": self.ts, "dur": self.dur, "row": self.row, "name": self.name}


def locate(index: TimelineIndex, artifact: str, loc: str) -> Located | None:
    """The timed event that `artifact` reports at `loc` (traceEvents[51436], line 112,
    entries[3]), or None when the file has no timed event there."""
    codes = np.flatnonzero(index.artifact_names == artifact)
    if not len(codes) or not loc:
        return None
    same_loc = pc.equal(index.locs, loc).to_numpy(zero_copy_only=False)
    frame_rows = np.flatnonzero(same_loc & np.isin(index.artifact, codes))
    if not len(frame_rows):
        return None
    at = np.flatnonzero(np.isin(index.row, frame_rows))
    if not len(at):
        return None
    i = int(at[0])
    lane = int(np.searchsorted(index.offsets, i, side="right") - 1)
    return Located(lane, int(index.ts[i] - index.start_ns), int(index.end[i] - index.ts[i]), int(index.row[i]),
                   str(index.names[index.name[i]]))
