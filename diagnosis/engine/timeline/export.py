"""A time range of the timeline as Chrome trace JSON, which Perfetto and chrome://tracing
load: one process per host and device (or host and process), one thread per lane, complete
events ("X") for spans, counters ("C") for curves, instants for zero-length events."""
from __future__ import annotations

import numpy as np

from diagnosis.engine.timeline.index import BANDS, CURVE, TimelineIndex

MAX_EXPORT_EVENTS = 500_000


def chrome_trace(index: TimelineIndex, start_ns: int, end_ns: int,
                 max_events: int = MAX_EXPORT_EVENTS) -> dict:
    """Events overlapping [start_ns, end_ns) (absolute ns), at most `max_events`, the earliest
    lanes first; times in µs after the trace's origin, as the format wants."""
    events: list[dict] = []
    processes: dict[str, int] = {}
    threads: dict[tuple, int] = {}
    origin = index.start_ns
    left = max_events
    truncated = False
    for lane in index.lanes:
        process = " · ".join(lane.path[:2]) if lane.group in ("gpu", "cpu", "counter") else lane.group
        pid = processes.setdefault(process, len(processes) + 1)
        # a thread's depth lanes are one thread again: Perfetto nests its calls by itself
        thread_key = ("cpu", lane.path) if lane.group == "cpu" else ("lane", lane.id)
        tid = threads.get(thread_key)
        if tid is None:
            tid = threads[thread_key] = lane.id + 1
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": " · ".join(lane.path[2:]) or lane.label}})
        if lane.type == BANDS:
            for band in (b for b in index.bands if b.lane == lane.id and b.ts < end_ns and b.ts + b.dur >= start_ns):
                events.append({"ph": "X", "name": f"{band.ref} {band.title}", "cat": band.kind, "pid": pid,
                               "tid": tid, "ts": (band.ts - origin) / 1000, "dur": band.dur / 1000,
                               "args": {"severity": band.severity}})
            continue
        s, e = int(index.offsets[lane.id]), int(index.offsets[lane.id + 1])
        lo = s + int(np.searchsorted(index.run_end[s:e], start_ns, side="left"))
        hi = s + int(np.searchsorted(index.ts[s:e], end_ns, side="left"))
        rows = lo + np.flatnonzero(index.end[lo:hi] >= start_ns) if hi > lo else np.zeros(0, np.int64)
        if len(rows) > left:
            rows, truncated = rows[:left], True
        left -= len(rows)
        ts = ((index.ts[rows] - origin) / 1000).tolist()
        dur = ((index.end[rows] - index.ts[rows]) / 1000).tolist()
        names = index.names[index.name[rows]].tolist()
        kinds = [index.kinds[k] for k in index.kind[rows].tolist()]
        if lane.type == CURVE:
            values = np.nan_to_num(index.value[rows]).tolist()
            events.extend({"ph": "C", "name": str(n), "pid": pid, "tid": tid, "ts": t, "args": {str(n): v}}
                          for t, n, v in zip(ts, names, values))
        else:
            events.extend({"ph": "X" if d > 0 else "i", "name": str(n), "cat": k, "pid": pid, "tid": tid,
                           "ts": t, **({"dur": d} if d > 0 else {"s": "t"})}
                          for t, d, n, k in zip(ts, dur, names, kinds))
    events.extend({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}
                  for name, pid in processes.items())
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"origin_ns": str(origin), "start_ns": str(start_ns), "end_ns": str(end_ns),
                          "truncated": truncated}}
