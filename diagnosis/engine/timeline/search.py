"""Search the timeline's events by name (pure: no Django, no I/O).

The page holds only a merged summary of a big trace, so it asks here: a case-insensitive
substring (never a regex: the query is untrusted) is matched once per distinct name, then
the rows of the matching names are listed in time order, `offset` onwards.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from diagnosis.engine.timeline.index import CURVE, TimelineIndex

MAX_QUERY_CHARS = 200
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
TOP_NAMES = 10


@dataclass(frozen=True)
class Match:
    lane: int
    ts: int     # ns after the trace's origin
    dur: int
    row: int    # the event frame's row (-1: a per-step latency point)
    name: str
    kind: str

    def to_dict(self) -> dict:
        return {"lane": self.lane, "ts": self.ts, "dur": self.dur, "row": self.row, "name": self.name,
                "kind": self.kind}


@dataclass(frozen=True)
class SearchResult:
    query: str
    total: int                          # every matching event of the trace
    offset: int
    matches: list[Match]                # `total` matches in time order, from `offset`
    names: list[tuple[str, int]]        # the matching names with the most events, with their counts

    def to_dict(self) -> dict:
        return {"query": self.query, "total": self.total, "offset": self.offset,
                "matches": [m.to_dict() for m in self.matches],
                "names": [{"name": n, "count": c} for n, c in self.names]}


def matching_names(index: TimelineIndex, query: str) -> np.ndarray:
    """The codes of the names that contain `query`, ignoring case."""
    if not len(index.names):
        return np.zeros(0, np.int64)
    names = pa.array([str(n) for n in index.names], pa.string())
    hit = pc.match_substring(names, query, ignore_case=True).to_numpy(zero_copy_only=False)
    return np.flatnonzero(hit)


def search(index: TimelineIndex, query: str, offset: int = 0, limit: int = DEFAULT_LIMIT) -> SearchResult:
    query = query.strip()[:MAX_QUERY_CHARS]
    limit = max(1, min(int(limit), MAX_LIMIT))
    offset = max(0, int(offset))
    if not query:
        return SearchResult(query, 0, offset, [], [])
    codes = matching_names(index, query)
    # telemetry curves are samples of a metric, not events one would jump between
    curve_lanes = [lane.id for lane in index.lanes if lane.type == CURVE]
    hit = np.isin(index.name, codes)
    for lane in curve_lanes:
        hit[index.lane_slice(lane)] = False
    rows = np.flatnonzero(hit)
    rows = rows[np.argsort(index.ts[rows], kind="stable")]   # lane order -> time order
    counts = np.bincount(index.name[rows], minlength=len(index.names)) if len(rows) else np.zeros(0, np.int64)
    top = np.argsort(-counts, kind="stable")[:TOP_NAMES] if len(rows) else np.zeros(0, np.int64)
    names = [(str(index.names[c]), int(counts[c])) for c in top.tolist() if counts[c]]
    page = rows[offset:offset + limit]
    lanes = np.searchsorted(index.offsets, page, side="right") - 1
    matches = [Match(int(lane), int(index.ts[i] - index.start_ns), int(index.end[i] - index.ts[i]), int(index.row[i]),
                     str(index.names[index.name[i]]), index.kinds[index.kind[i]])
               for i, lane in zip(page.tolist(), lanes.tolist())]
    return SearchResult(query, len(rows), offset, matches, names)
