"""Totals of a selected time range of the timeline (pure: no Django, no I/O): per lane the
events that overlap it, the time they cover inside it (busy: the union of their clipped
spans, so nested or overlapping events count once) and the summed clipped durations; the
names that took the most time in it, GPU work apart from the rest (what ran on the GPU is
the usual question, and host spans that cover the whole range would hide it); the findings
it crosses."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from diagnosis.engine.timeline.index import BANDS, CURVE, TimelineIndex

TOP_NAMES = 10


@dataclass(frozen=True)
class LaneTotal:
    lane: int
    label: str
    group: str
    count: int
    busy_ns: int          # the union of the events' spans inside the range
    summed_ns: int        # their clipped durations added up
    mean_value: float | None = None   # curves: the mean of the samples in the range
    unit: str = ""


@dataclass(frozen=True)
class NameTotal:
    name: str
    kind: str
    count: int
    summed_ns: int


@dataclass(frozen=True)
class RangeTotals:
    start_ns: int         # absolute
    end_ns: int
    count: int
    lanes: list[LaneTotal]           # lanes with at least one event in the range, page order
    gpu_names: list[NameTotal]       # GPU work, the longest in summed time first
    other_names: list[NameTotal]     # everything else (host calls, spans, log lines), the same
    findings: list[str]              # "F2 NCCL watchdog timeout"

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """The length of the union of [starts, ends) spans sorted by start: each span adds what
    reaches past the furthest end before it."""
    if not len(starts):
        return 0
    reached = np.maximum.accumulate(ends)
    before = np.r_[starts[0], reached[:-1]]
    return int(np.maximum(ends - np.maximum(starts, before), 0).sum())


def _rows_in(index: TimelineIndex, lane: int, start: int, end: int) -> np.ndarray:
    s, e = int(index.offsets[lane]), int(index.offsets[lane + 1])
    if e <= s:
        return np.zeros(0, np.int64)
    lo = s + int(np.searchsorted(index.run_end[s:e], start, side="left"))
    hi = s + int(np.searchsorted(index.ts[s:e], end, side="left"))
    if hi <= lo:
        return np.zeros(0, np.int64)
    # nested rows that ended before the range are left out; a zero-length event at `start` is in
    return lo + np.flatnonzero((index.end[lo:hi] > start) | (index.ts[lo:hi] >= start))


def totals(index: TimelineIndex, start_ns: int, end_ns: int) -> RangeTotals:
    start, end = int(start_ns), max(int(end_ns), int(start_ns) + 1)
    lanes: list[LaneTotal] = []
    gpu_rows: list[np.ndarray] = []
    other_rows: list[np.ndarray] = []
    count = 0
    for lane in index.lanes:
        if lane.type == BANDS:
            continue
        rows = _rows_in(index, lane.id, start, end)
        if not len(rows):
            continue
        count += len(rows)
        if lane.type == CURVE:
            lanes.append(LaneTotal(lane.id, lane.label, lane.group, len(rows), 0, 0,
                                   float(np.nanmean(index.value[rows])) if np.isfinite(index.value[rows]).any()
                                   else None, lane.unit))
            continue
        clipped_start = np.maximum(index.ts[rows], start)
        clipped_end = np.minimum(index.end[rows], end)
        lanes.append(LaneTotal(lane.id, lane.label, lane.group, len(rows), union_ns(clipped_start, clipped_end),
                               int(np.maximum(clipped_end - clipped_start, 0).sum()), unit=lane.unit))
        (gpu_rows if lane.group == "gpu" else other_rows).append(rows)
    return RangeTotals(start, end, count, lanes, _top_names(index, gpu_rows, start, end),
                       _top_names(index, other_rows, start, end),
                       [f"{b.ref} {b.title}" for b in index.bands if b.ts < end and b.ts + max(b.dur, 1) > start])


def _top_names(index: TimelineIndex, span_rows: list[np.ndarray], start: int, end: int) -> list[NameTotal]:
    if not span_rows:
        return []
    rows = np.concatenate(span_rows)
    clipped = np.maximum(np.minimum(index.end[rows], end) - np.maximum(index.ts[rows], start), 0)
    codes = index.name[rows].astype(np.int64)
    summed = np.bincount(codes, weights=clipped, minlength=len(index.names))
    counts = np.bincount(codes, minlength=len(index.names))
    # a name's kind: that of its first row in the range (a name is one kind of event in practice)
    first_row = np.full(len(index.names), -1, np.int64)
    first_row[codes[::-1]] = rows[::-1]
    top = [int(c) for c in np.lexsort((-counts, -summed))[:TOP_NAMES] if counts[c]]
    return [NameTotal(str(index.names[c]), index.kinds[index.kind[first_row[c]]], int(counts[c]), int(summed[c]))
            for c in top]
