"""The trace's events arranged for the zoomable timeline (pure: no Django, no I/O).

`build_index(events, report)` sorts every timed event into a lane once: GPU work per
host -> device -> stream, host calls per host -> process -> thread -> call depth (a flame
chart: a CPU op sits one lane below the op it runs inside), log lines per file, one curve per
telemetry metric, per-step latency, and finding / SLO-violation bands. Each lane's
rows are kept sorted by start time with a running maximum of their end times, so any view
(`diagnosis.engine.timeline.view`) finds the rows it overlaps with two binary searches instead of a
scan of the whole trace.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from diagnosis.engine.results import FailedSLO, Report

# Work that occupies a GPU stream (diagnosis.engine.breakdowns counts the same kinds as GPU work).
GPU_KINDS = ("kernel", "memcpy", "memset", "collective", "sync", "graph")
LOG_KINDS = ("log", "error", "oom")
COUNTER_KIND = "sample"

SPANS, CURVE, BANDS = "spans", "curve", "bands"
# Lane groups in the order the page stacks them.
GROUP_ORDER = ("findings", "steps", "gpu", "cpu", "counter", "log")
# Host calls deeper than this share the last depth lane of their thread (a 40-deep Python
# stack would otherwise push every other lane off the page).
MAX_DEPTH = 16


@dataclass(frozen=True)
class Lane:
    id: int
    group: str                 # one of GROUP_ORDER
    path: tuple[str, ...]      # host -> device -> stream, host -> process -> thread, ...
    type: str                  # SPANS, CURVE or BANDS
    unit: str = ""
    depth: int = 0             # host calls: how many calls of the same thread this lane's run inside

    @property
    def label(self) -> str:
        # deeper lanes name only their thread: the lane above says which host and process
        if self.depth:
            thread = next((p for p in reversed(self.path) if p != "other events"), self.path[-1])
            return f"{thread} · depth {self.depth}"
        return " · ".join(self.path)

    def to_dict(self, events: int) -> dict:
        return {"id": self.id, "group": self.group, "path": list(self.path), "label": self.label,
                "type": self.type, "unit": self.unit, "depth": self.depth, "events": events}


@dataclass(frozen=True)
class Band:
    """A finding or an SLO violation drawn over the time it covers."""
    lane: int
    ts: int
    dur: int
    kind: str        # "finding" or "violation"
    ref: str         # the finding id (F1) or the SLO name
    title: str
    severity: str


@dataclass
class TimelineIndex:
    """Event rows grouped by lane: `offsets[i]:offsets[i+1]` are lane i's rows, by start time.
    `row` is each event's row in the event frame (for its location and the Perfetto export)."""
    lanes: list[Lane]
    offsets: np.ndarray        # int64, len(lanes) + 1
    ts: np.ndarray             # int64
    end: np.ndarray            # int64: ts + dur
    run_end: np.ndarray        # int64: running max of `end` within each lane
    name: np.ndarray           # int32 codes into `names`
    kind: np.ndarray           # int8 codes into `kinds`
    value: np.ndarray          # float64 (curves)
    value_or_zero: np.ndarray  # `value` with NaN as 0, for sums over slices of a curve
    row: np.ndarray            # int64
    corr: np.ndarray           # int64: the profiler's correlation id (a launch and its kernel share it), -1 none
    names: np.ndarray          # object: the name of each code
    kinds: tuple[str, ...]
    artifact: np.ndarray       # int32 code of each row's artifact (by frame row)
    artifact_names: np.ndarray  # object
    locs: pa.Array             # each row's location, by frame row (traceEvents[12], line 40)
    bands: list[Band]
    start_ns: int
    end_ns: int

    def lane_slice(self, lane: int) -> slice:
        return slice(int(self.offsets[lane]), int(self.offsets[lane + 1]))

    def events_in(self, lane: int) -> int:
        return int(self.offsets[lane + 1] - self.offsets[lane])


def _strings(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(codes, categories) of a name-like column, categorical or not."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(np.int32), column.cat.categories.to_numpy(dtype=object)
    codes, uniques = pd.factorize(column.astype(str).to_numpy(), use_na_sentinel=False)
    return codes.astype(np.int32), np.asarray(uniques, dtype=object)


def _category_mask(codes: np.ndarray, categories: np.ndarray, wanted: tuple[str, ...]) -> np.ndarray:
    ids = [i for i, c in enumerate(categories) if c in wanted]
    return np.isin(codes, ids) if ids else np.zeros(len(codes), bool)


GPU, CPU, COUNTER, LOG = range(4)
_GROUP_NAMES = {GPU: "gpu", CPU: "cpu", COUNTER: "counter", LOG: "log"}


def _lane_keys(events: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the numbers that pick its lane: group, host, and two more (device and stream,
    process and thread, device and metric, the log file); with the host, artifact and name
    strings the codes point into."""
    kind_codes, kind_names = _strings(events["kind"])
    host_codes, host_names = _strings(events["host"])
    art_codes, art_names = _strings(events["artifact"])
    name_codes, name_names = _strings(events["name"])
    device = events["device"].to_numpy(np.int64)
    stream = events["stream"].to_numpy(np.int64)
    gpu = _category_mask(kind_codes, kind_names, GPU_KINDS) & ((stream >= 0) | (device >= 0))
    counter = _category_mask(kind_codes, kind_names, (COUNTER_KIND,)) & ~gpu
    log = _category_mask(kind_codes, kind_names, LOG_KINDS) & ~gpu & ~counter
    group = np.select([gpu, counter, log], [GPU, COUNTER, LOG], CPU).astype(np.int8)
    # a file with no host name: the file is the host (host code -1 -> the artifact's code, negated)
    no_host = (host_codes < 0) | (host_names[np.maximum(host_codes, 0)] == "") if len(host_names) else \
        np.ones(len(host_codes), bool)
    host = np.where(no_host, -1 - art_codes.astype(np.int64), host_codes.astype(np.int64))
    pid, tid = events["pid"].to_numpy(np.int64), events["tid"].to_numpy(np.int64)
    a = np.select([gpu, counter, log], [device, device, art_codes], pid)
    b = np.select([gpu, counter, log], [stream, name_codes, 0], tid)
    keys = pd.DataFrame({"group": group, "host": host, "a": a, "b": b})
    return keys, host_names, art_names, name_names


def nesting_depth(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row, how many rows of the same `thread` started no later and are still running
    when it starts: its depth in that thread's call stack when calls nest properly (a call
    that overlaps another without nesting is simply stacked below it). O(n log n) in numpy.

    With each thread's rows ordered by start, then longest first, row i's depth is the number
    of earlier rows that end after it starts: i minus the rows that ended by then. A
    zero-length row at the same start as i that sorts after i also "ends by then"; it is not
    before i, so it is taken back out."""
    out = np.zeros(len(ts), np.int64)
    if not len(ts):
        return out
    order = np.lexsort((-end, ts, thread))
    g, t, e = thread[order], ts[order], end[order]
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
    depth = np.empty(len(order), np.int64)
    for s, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # threads are few; rows many
        tt, ee = t[s:stop], e[s:stop]
        i = np.arange(stop - s)
        ended = np.searchsorted(np.sort(ee), tt, side="right")
        zero = ee == tt
        zero_ts = tt[zero]
        zeros_here = np.searchsorted(zero_ts, tt, side="right") - np.searchsorted(zero_ts, tt, side="left")
        block_last = np.searchsorted(tt, tt, side="right") - 1
        not_before = np.where(zero, block_last - i + 1, zeros_here)
        depth[s:stop] = i - (ended - not_before)
    out[order] = depth
    return out


def _lane_path(key: tuple, host_names, art_names, name_names) -> tuple[str, ...]:
    group, host, a, b, _depth = (int(k) for k in key)
    host_name = str(art_names[-1 - host]) if host < 0 else str(host_names[host])
    parts: tuple[str, ...]
    if group == GPU:
        parts = (f"GPU {a}", f"stream {b}" if b >= 0 else "")
    elif group == COUNTER:
        parts = (f"GPU {a}" if a >= 0 else "", str(name_names[b]) if b >= 0 else "")
    elif group == LOG:
        parts = (str(art_names[a]) if a >= 0 and str(art_names[a]) != host_name else "", "")
    else:
        parts = (f"process {a}" if a >= 0 else "", f"thread {b}" if b >= 0 else "")
        parts = parts if any(parts) else ("other events",)
    return tuple(p for p in (host_name, *parts) if p)


def _lane_sort_key(key: tuple, path: tuple[str, ...]) -> tuple:
    group, host, a, b, depth = (int(k) for k in key)
    return GROUP_ORDER.index(_GROUP_NAMES[group]), path[0], a, b, path, depth


def _with_depth(keys: pd.DataFrame, ts: np.ndarray, end: np.ndarray) -> pd.DataFrame:
    """`keys` plus each host call's depth in its thread (0 for every other row)."""
    depth = np.zeros(len(keys), np.int64)
    cpu = keys["group"].to_numpy() == CPU
    if cpu.any():
        thread = keys.loc[cpu, ["host", "a", "b"]].groupby(["host", "a", "b"], sort=False).ngroup().to_numpy(np.int64)
        depth[cpu] = np.minimum(nesting_depth(thread, ts[cpu], end[cpu]), MAX_DEPTH - 1)
    return keys.assign(depth=depth)


def build_index(events: pd.DataFrame, report: Report | None = None) -> TimelineIndex:
    """Lanes and their sorted rows for `events` (the pipeline's frame, on the report's clock);
    the report adds per-step latency and finding / violation bands."""
    ts_all = events["ts"].to_numpy(np.int64)
    timed = np.flatnonzero(ts_all > 0)
    # only the columns lanes need: taking rows of the free-text columns would cost seconds
    frame = events[["kind", "name", "host", "artifact", "device", "stream", "pid", "tid", "value", "unit",
                    "corr"]].iloc[timed]
    keys, host_names, art_names, name_names_all = _lane_keys(frame)
    ts = ts_all[timed]
    dur = np.maximum(events["dur"].to_numpy(np.int64)[timed], 0)
    keys = _with_depth(keys, ts, ts + dur)
    # groups numbered in order of first appearance, as drop_duplicates lists them
    lane_of_row = keys.groupby(["group", "host", "a", "b", "depth"], sort=False).ngroup().to_numpy(np.int64)
    found = list(keys.drop_duplicates().itertuples(index=False, name=None))
    paths = [_lane_path(k, host_names, art_names, name_names_all) for k in found]
    name_codes, names = _strings(frame["name"]) if len(frame) else (np.zeros(0, np.int32), np.array([], object))
    steps = _steps(report)
    bands = _bands(report)
    band_lanes = 1 + max((b.lane for b in bands), default=-1)
    lanes, rank = _lanes(found, paths, _lane_units(frame, lane_of_row, len(found)), band_lanes, steps is not None)

    lane = rank[lane_of_row] if len(found) else np.zeros(0, np.int64)
    kind_codes, kind_names = _strings(frame["kind"]) if len(frame) else (np.zeros(0, np.int32), np.array([], object))
    kinds = tuple(str(k) for k in kind_names) + ("step",)
    value = frame["value"].to_numpy(np.float64) if len(frame) else np.zeros(0)
    row = timed.astype(np.int64)
    corr = frame["corr"].to_numpy(np.int64) if len(frame) else np.zeros(0, np.int64)
    if steps is not None:   # the step lane's rows: no frame row (-1), the latency as value
        s_ts, s_dur, s_ms, s_names = steps
        lane = np.concatenate([lane, np.full(len(s_ts), band_lanes, np.int64)])
        ts, dur, value = np.concatenate([ts, s_ts]), np.concatenate([dur, s_dur]), np.concatenate([value, s_ms])
        name_codes = np.concatenate([name_codes, len(names) + np.arange(len(s_ts), dtype=np.int32)])
        names = np.concatenate([names, s_names])
        kind_codes = np.concatenate([kind_codes, np.full(len(s_ts), len(kinds) - 1, np.int32)])
        row = np.concatenate([row, np.full(len(s_ts), -1, np.int64)])
        corr = np.concatenate([corr, np.full(len(s_ts), -1, np.int64)])
    order = np.lexsort((ts, lane))
    lane, ts, dur = lane[order], ts[order], dur[order]
    end = ts + dur
    offsets = np.searchsorted(lane, np.arange(len(lanes) + 1), side="left").astype(np.int64)
    run_end = _running_max(end, offsets)
    art_codes, art_names = _strings(events["artifact"])
    # the default view is the report's span: the artifacts on the common clock (one left on its
    # own clock, a perf capture without an offset, would stretch it over whatever it counts from)
    trace = report.trace if report else None
    # (a summary with a start has an end: diagnosis.engine.report sets both from one span)
    span = (trace.start_ts, trace.end_ts) if trace and trace.start_ts and trace.end_ts is not None else None
    starts = [span[0]] if span else [int(ts.min())] if len(ts) else []
    ends = [span[1]] if span else [int(end.max())] if len(end) else []
    starts += [b.ts for b in bands]
    ends += [b.ts + b.dur for b in bands]
    return TimelineIndex(
        lanes=lanes, offsets=offsets, ts=ts, end=end, run_end=run_end,
        name=name_codes[order].astype(np.int32), kind=kind_codes[order].astype(np.int8),
        value=value[order], value_or_zero=np.nan_to_num(value[order], nan=0.0), row=row[order], corr=corr[order],
        names=np.asarray(names, dtype=object), kinds=kinds,
        artifact=np.where(art_codes < 0, len(art_names), art_codes), artifact_names=np.r_[art_names, np.array([""], object)],
        locs=_arrow_strings(events["loc"]), bands=bands,
        start_ns=min(starts, default=0), end_ns=max(ends, default=0))


def _lanes(found: list[tuple], paths: list[tuple[str, ...]], units: list[str], band_lanes: int,
           has_steps: bool) -> tuple[list[Lane], np.ndarray]:
    """All lanes in page order (the finding bands, the step latency, then the `found` lanes by
    `_lane_sort_key`), and the lane id of each of `found`."""
    extra_lanes = band_lanes + (1 if has_steps else 0)
    order_of_lane = sorted(range(len(found)), key=lambda i: _lane_sort_key(found[i], paths[i]))
    lanes: list[Lane] = []
    rank = np.empty(len(found), np.int64)
    for position, i in enumerate(order_of_lane):
        group = _GROUP_NAMES[int(found[i][0])]
        rank[i] = position + extra_lanes
        lanes.append(Lane(position + extra_lanes, group, paths[i], CURVE if group == "counter" else SPANS, units[i],
                          int(found[i][4])))
    prefix = [Lane(i, "findings", (f"findings {i + 1}" if band_lanes > 1 else "findings",), BANDS)
              for i in range(band_lanes)]
    if has_steps:
        prefix.append(Lane(band_lanes, "steps", ("step latency",), SPANS, "ms"))
    return prefix + lanes, rank


def _running_max(end: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The running maximum of `end` within each lane's rows (`offsets[i]:offsets[i + 1]`)."""
    run_end = end.copy()
    for i in range(len(offsets) - 1):   # lanes are few; rows are many
        s, e = offsets[i], offsets[i + 1]
        if e > s:
            np.maximum.accumulate(run_end[s:e], out=run_end[s:e])
    return run_end


def _arrow_strings(column: pd.Series) -> pa.Array:
    if isinstance(column.dtype, pd.ArrowDtype):
        # one chunk: `take` over many chunks costs ~1 s a view on a tiled 1M-row frame
        return pa.chunked_array(column.array._pa_array).combine_chunks()
    return pa.array(column.astype(str).to_numpy(), pa.string())


def _lane_units(frame: pd.DataFrame, lane_of_row: np.ndarray, n: int) -> list[str]:
    """The unit of each lane's values (telemetry curves: %, bytes, W)."""
    if not n:
        return []
    codes, units = _strings(frame["unit"])
    first = pd.Series(codes).groupby(lane_of_row).first()
    out = [""] * n
    for lane, code in first.items():
        out[int(lane)] = str(units[code]) if code >= 0 else ""
    return out


def _steps(report: Report | None):
    """(ts, dur, ms, names) of the report's per-step latency, or None."""
    points = (report.trace.series.get("step_latency_ms") or []) if report else []
    if not points:
        return None
    ts = np.array([int(p["ts"]) for p in points], np.int64)
    ms = np.array([float(p["ms"]) for p in points], np.float64)
    names = np.array([f"step {p['step']}" + (" (cold)" if p.get("cold") else "") + (" (spike)" if p.get("spike") else "")
                      for p in points], dtype=object)
    return ts, np.round(ms * 1e6).astype(np.int64), ms, names


def _bands(report: Report | None) -> list[Band]:
    """Findings and SLO violations, each on the first band lane where it overlaps nothing
    (overlapping findings are stacked, not drawn over each other)."""
    if report is None:
        return []
    spans = []
    for f in report.findings:
        if f.start_ts:
            spans.append((int(f.start_ts), max(int(f.end_ts or f.start_ts), int(f.start_ts)),
                          "finding", f.id, f.title, f.severity))
    for v in report.violations:
        if isinstance(v, FailedSLO) or not v.window or not v.window[0]:
            continue
        spans.append((int(v.window[0]), max(int(v.window[1] or v.window[0]), int(v.window[0])),
                      "violation", v.slo, v.title or v.slo, "error"))
    spans.sort(key=lambda s: (s[0], s[1]))
    lane_free_at: list[int] = []
    bands = []
    for start, end, kind, ref, title, severity in spans:
        lane = next((i for i, free in enumerate(lane_free_at) if free < start), len(lane_free_at))
        if lane == len(lane_free_at):
            lane_free_at.append(end)
        lane_free_at[lane] = max(end, start + 1)
        bands.append(Band(lane, start, end - start, kind, ref, title, severity))
    return bands
