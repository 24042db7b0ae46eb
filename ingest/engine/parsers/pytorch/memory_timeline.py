"""torch.profiler's raw memory timeline (`prof.export_memory_timeline_raw(path, device)`):
a JSON list of [timestamp, action, bytes, category] (HTA's memory analysis reads the same).

Actions (torch.profiler._memory_profiler): 1 preexisting, 2 create, 3 increment_version
(written twice: bytes leave the old category, then join the new one), 4 destroy. Categories
0..7: parameter, optimizer_state, input, temporary, activation, gradient, autograd_detail,
unknown. Timestamps are the profiler's nanoseconds; -1 marks memory that existed before
profiling started (placed at the first timestamp).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import re2  # linear time: detection runs this on every uploaded file

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, describe
from ingest.engine.io import decode_json, read_all

FORMAT = "memory_timeline"
SOURCE = "memory_snapshot"
MAX_BYTES = 2 * 1024**3

ACTIONS = {1: ("alloc", "preexisting"), 2: ("alloc", "create"), 3: ("marker", "increment_version"),
           4: ("free", "destroy")}
CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
              "autograd_detail", "unknown")
_HEAD = re2.compile(rb"^\s*\[\s*\[\s*-?\d+\s*,\s*[1-4]\s*,\s*-?\d+\s*,\s*[0-7]\s*\]")
UNIX_NS = 10**17  # later than 1973 in ns: a wall clock, not a profiler-relative one


def sniff(head: bytes, name: str) -> bool:
    return bool(_HEAD.match(head))


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    data = read_all(path, MAX_BYTES)
    rows = decode_json(data, path, expected="a complete JSON list of [ts, action, bytes, category]")
    if not isinstance(rows, list):
        raise ParseError(str(path), "top level", "a JSON list of [ts, action, bytes, category]", got=describe(rows))
    index = [i for i, r in enumerate(rows) if isinstance(r, list) and len(r) == 4
             and all(isinstance(v, int) and not isinstance(v, bool) for v in r)
             and r[1] in ACTIONS and 0 <= r[3] < len(CATEGORIES)]
    good = [rows[i] for i in index]
    if len(good) < len(rows):
        report.skipped["memory timeline entry that is not [ts, action 1-4, bytes, category 0-7]"] += \
            len(rows) - len(good)
    if not good:
        return
    table = np.array(good, dtype=np.int64)
    ts, action, nbytes, category = table.T
    timed = ts[ts >= 0]
    start = int(timed.min()) if len(timed) else 0
    ts = np.where(ts < 0, start, ts)
    report.set_clock(Clock("unix") if start > UNIX_NS else
                     Clock("relative", note="profiler nanoseconds without a wall-clock anchor"))
    report.meta["entries"] = len(good)
    kinds = np.array([ACTIONS[a][0] for a in range(1, 5)], dtype=object)[action - 1]
    names = np.array([ACTIONS[a][1] for a in range(1, 5)], dtype=object)[action - 1]
    cats = np.array(CATEGORIES, dtype=object)[category]
    sink.emit_columns({
        "ts": ts, "kind": kinds.tolist(), "name": names.tolist(), "value": nbytes.astype(float),
        "unit": ["bytes"] * len(ts),
        "attrs": [f'{{"category":"{c}"}}' for c in cats], "loc": [f"entry {i}" for i in index],
    })
