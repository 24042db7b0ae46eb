"""HTA's breakdowns on tracedoc's event frame: temporal, idle time, kernels, communication /
computation overlap and CUDA launch statistics.

The definitions are HolisticTraceAnalysis 0.5's (hta/analyzers/breakdown_analysis.py,
communication_analysis.py, cuda_kernel_analysis.py), computed per device with whole-column
numpy/pandas operations so a 500k-event trace takes well under a second. Times are ns, as in
the frame. docs/breakdowns.md lists each definition and where tracedoc differs from HTA.

A device is (artifact, device): two files may both call their GPU "0".
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import in_values

# Kinds that occupy a GPU stream: HTA takes every event with a stream (stream != -1).
# Collective kernels are "collective" in tracedoc; GPU user annotations (kind "annotation")
# also carry a stream but are ranges over kernels, not work, and HTA has no stream for them.
GPU_WORK_KINDS = ("kernel", "memcpy", "memset", "collective", "sync")
# Nsight Compute replays kernels one by one and gives no start times (ts = 0): no timeline.
UNTIMED_SOURCES = ("ncu",)
# HTA's idle-time breakdown looks at kernels, memcpy and memset only, not cuda_sync.
IDLE_KINDS = ("kernel", "memcpy", "memset", "collective")
LAUNCH_CALL_KINDS = ("runtime", "driver")
# HTA's launch statistics pair these calls with the GPU work they enqueue (memory calls included).
# HTA lists CUDA's calls only, so a ROCm trace got no statistics: their HIP counterparts are added
# (a CUDA trace's figures stay HTA's; the driver's cuLaunchKernel stays out, as in HTA).
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync",
                "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel",
                "hipMemcpyAsync", "hipMemsetAsync")

KERNEL_TYPES = ("computation", "communication", "memory", "other")
_COMPUTE, _COMM, _MEMORY, _OTHER = range(len(KERNEL_TYPES))
# hta.utils.utils: NCCL_KERNEL_RE, MEMORY_KERNEL_RE, NCCL_COMPUTE_KERNEL_RE (applied with re.match)
_COMM_RE = r"^nccl.*Kernel"
_MEMORY_RE = r"^(?:Memcpy|Memset|dma)"
_NOT_COMPUTE_RE = r"^(?:nccl.*Kernel|.*Memcpy|Memset|.*Sync)"

# HTA's defaults: get_idle_time_breakdown(consecutive_kernel_delay=30) on µs timestamps,
# get_cuda_kernel_launch_stats(runtime_cutoff=50, launch_delay_cutoff=100) in µs.
KERNEL_WAIT_NS = 30_000
LONG_LAUNCH_NS = 50_000
LAUNCH_DELAY_NS = 100_000
TOP_KERNELS = 10
NO_LAUNCH = np.iinfo(np.int64).min


# ---------------------------------------------------------------- results

@dataclass(frozen=True)
class TemporalBreakdown:
    """Where a device's time went between its first and last GPU activity. Overlapping work
    counts once, in the first of compute > communication > memory > other it belongs to
    (HTA's compute time is the compute union; its non-compute time is the other three)."""
    artifact: str
    device: int
    span_ns: int
    compute_ns: int
    communication_ns: int
    memory_ns: int
    other_ns: int
    idle_ns: int

    @property
    def non_compute_ns(self) -> int:
        return self.communication_ns + self.memory_ns + self.other_ns

    def pct(self, part_ns: int) -> float:
        return 100.0 * part_ns / self.span_ns if self.span_ns else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for part in ("compute", "communication", "memory", "other", "idle", "non_compute"):
            out[f"{part}_pct"] = round(self.pct(getattr(self, f"{part}_ns")), 2)
        out["non_compute_ns"] = self.non_compute_ns
        return out


@dataclass(frozen=True)
class IdleTimeBreakdown:
    """Gaps between consecutive kernels/copies of one stream, by likely cause: the host had not
    yet launched the next one (host wait), a gap too short to be anything but launch latency
    (kernel wait), or anything else (e.g. waiting on an event from another stream)."""
    artifact: str
    device: int
    stream: int
    host_wait_ns: int
    kernel_wait_ns: int
    other_ns: int

    @property
    def idle_ns(self) -> int:
        return self.host_wait_ns + self.kernel_wait_ns + self.other_ns

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["idle_ns"] = total = self.idle_ns
        for part in ("host_wait", "kernel_wait", "other"):
            out[f"{part}_ratio"] = round(getattr(self, f"{part}_ns") / total, 4) if total else 0.0
        return out


@dataclass(frozen=True)
class KernelStats:
    """Durations of every launch of one kernel name (or of all kernels not in the top list)."""
    name: str
    kernel_type: str
    count: int
    total_ns: int
    mean_ns: float
    min_ns: int
    max_ns: int
    std_ns: float  # sample standard deviation, 0 for a single launch (as HTA)


@dataclass(frozen=True)
class KernelTypeTotal:
    kernel_type: str
    count: int
    total_ns: int  # summed durations: overlapping kernels count twice
    share_pct: float  # of all GPU work time on the device


@dataclass(frozen=True)
class KernelBreakdown:
    artifact: str
    device: int
    by_type: tuple[KernelTypeTotal, ...]
    top: tuple[KernelStats, ...]  # by total time, longest first
    others: KernelStats | None  # every kernel not in `top`, pooled

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CommComputeOverlap:
    """How much of the time spent in communication kernels also had computation running
    (HTA's comp_comm_overlap: |compute ∩ communication| / |communication|, unions)."""
    artifact: str
    device: int
    compute_ns: int
    communication_ns: int
    overlap_ns: int

    @property
    def overlap_pct(self) -> float | None:
        return 100.0 * self.overlap_ns / self.communication_ns if self.communication_ns else None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        pct = self.overlap_pct
        out["overlap_pct"] = None if pct is None else round(pct, 2)
        return out


@dataclass(frozen=True)
class Summary:
    count: int
    mean_ns: float
    p50_ns: float
    p95_ns: float
    max_ns: int
    total_ns: int


@dataclass(frozen=True)
class LaunchStats:
    """Each launch call paired with the GPU work it enqueued: CPU time of the call, GPU time of
    the work, and the delay from the call's end to the work's start (clipped at 0, as HTA)."""
    artifact: str
    device: int
    cpu_duration: Summary
    gpu_duration: Summary
    launch_delay: Summary
    gpu_shorter_than_launch: int  # work that ran for less time than its launch call took
    long_launches: int  # calls longer than LONG_LAUNCH_NS
    delayed_launches: int  # delays longer than LAUNCH_DELAY_NS

    @property
    def launches(self) -> int:
        return self.cpu_duration.count

    def to_dict(self) -> dict[str, Any]:
        return {"launches": self.launches, **asdict(self)}


@dataclass(frozen=True)
class Breakdowns:
    temporal: tuple[TemporalBreakdown, ...]
    idle_time: tuple[IdleTimeBreakdown, ...]
    kernels: tuple[KernelBreakdown, ...]
    overlap: tuple[CommComputeOverlap, ...]
    launches: tuple[LaunchStats, ...]

    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        return {part: [item.to_dict() for item in getattr(self, part)]
                for part in ("temporal", "idle_time", "kernels", "overlap", "launches")}


# ---------------------------------------------------------------- entry point

def breakdowns(frame: pd.DataFrame, top_kernels: int = TOP_KERNELS) -> Breakdowns:
    """Every breakdown of the frame's GPU devices (empty tuples when it has no GPU work)."""
    work = gpu_work(frame)
    return Breakdowns(temporal=temporal_breakdown(work), idle_time=idle_time_breakdown(work),
                      kernels=kernel_breakdown(work, top_kernels), overlap=comm_compute_overlap(work),
                      launches=launch_stats(work))


# ---------------------------------------------------------------- GPU work

@dataclass(frozen=True)
class GpuWork:
    """The frame's GPU-stream rows as arrays, sorted by device then start: a device code per
    row (index into `devices`), a kernel-type code, and the host call that launched it (found
    by correlation id in the same file; NO_LAUNCH where the trace does not have it)."""
    devices: tuple[tuple[str, int], ...]  # code -> (artifact, device)
    device: np.ndarray
    stream: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    kernel_type: np.ndarray
    kind: pd.Categorical
    name: pd.Categorical
    launch_ts: np.ndarray
    launch_dur: np.ndarray
    launch_call: pd.Categorical  # name of the launching call (NaN where none)

    def __len__(self) -> int:
        return len(self.ts)


def gpu_work(frame: pd.DataFrame) -> GpuWork:
    on_stream = (frame["stream"].to_numpy() >= 0) & in_values(frame["kind"], GPU_WORK_KINDS)
    if "source" in frame.columns:
        on_stream &= ~in_values(frame["source"], UNTIMED_SOURCES)
    rows = np.flatnonzero(on_stream)
    artifact = _categorical(frame["artifact"], rows)
    by_device = pd.DataFrame({"artifact": artifact.codes, "device": frame["device"].to_numpy(np.int64)[rows]}).groupby(
        ["artifact", "device"], sort=True)
    device = by_device.ngroup().to_numpy(np.int64)
    # sorted by device, then start, once: every interval union below relies on it
    order = np.lexsort((frame["ts"].to_numpy(np.int64)[rows], device))
    rows, device, artifact = rows[order], device[order], artifact.take(order)
    ts = frame["ts"].to_numpy(np.int64)[rows]
    names, kinds = _categorical(frame["name"], rows), _categorical(frame["kind"], rows)
    launch_ts, launch_dur, launch_call = _launches(frame, artifact, frame["corr"].to_numpy(np.int64)[rows])
    return GpuWork(devices=tuple((str(artifact.categories[a]), int(d)) for a, d in by_device.size().index),
                   device=device, stream=frame["stream"].to_numpy(np.int64)[rows],
                   ts=ts, end=ts + np.maximum(frame["dur"].to_numpy(np.int64)[rows], 0),
                   kernel_type=_kernel_types(names, kinds), kind=kinds, name=names, launch_ts=launch_ts,
                   launch_dur=launch_dur, launch_call=launch_call)


def _categorical(column: pd.Series, rows: np.ndarray) -> pd.Categorical:
    """The column's `rows` as a Categorical of str holding only the values they use (the
    frame's dictionary columns already are one: no string is copied)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        values = column.array.take(rows)
    else:
        values = pd.Categorical(column.to_numpy(object)[rows].astype(str))
    values = values.remove_unused_categories()
    return values.rename_categories(values.categories.astype(str))


def _launches(frame: pd.DataFrame, artifact: pd.Categorical, corr: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, pd.Categorical]:
    """Start, duration and name of the runtime/driver call with each row's correlation id in
    the same file; the first call where a file repeats an id (as HTA keeps one)."""
    n = len(corr)
    ts, dur, which = np.full(n, NO_LAUNCH, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64)
    calls = np.flatnonzero(in_values(frame["kind"], LAUNCH_CALL_KINDS) & (frame["corr"].to_numpy() >= 0))
    call_names, call_artifact = _categorical(frame["name"], calls), _categorical(frame["artifact"], calls)
    call_corr, call_ts, call_dur = (frame[c].to_numpy(np.int64)[calls] for c in ("corr", "ts", "dur"))
    for code, name in enumerate(artifact.categories):  # one join per file, not per row
        mine = np.flatnonzero(artifact.codes == code)
        theirs = np.flatnonzero(call_artifact == name)
        ids = pd.Index(call_corr[theirs])
        first = ~ids.duplicated()
        theirs, ids = theirs[first], ids[first]
        hit = ids.get_indexer(corr[mine])
        found = hit >= 0
        pick = theirs[hit[found]]
        ts[mine[found]], dur[mine[found]], which[mine[found]] = call_ts[pick], call_dur[pick], call_names.codes[pick]
    return ts, dur, pd.Categorical.from_codes(which, categories=call_names.categories)


def hta_kernel_types(names: pd.Categorical) -> np.ndarray:
    """HTA's get_kernel_type (by name alone), decided once per distinct name."""
    cats = pd.Series(names.categories, dtype=object)
    per_name = np.full(len(cats), _OTHER, np.int8)
    per_name[~cats.str.match(_NOT_COMPUTE_RE).to_numpy(bool)] = _COMPUTE
    per_name[cats.str.match(_MEMORY_RE).to_numpy(bool)] = _MEMORY
    per_name[cats.str.match(_COMM_RE).to_numpy(bool)] = _COMM
    return per_name[names.codes] if len(cats) else np.full(len(names), _OTHER, np.int8)


def _kernel_types(names: pd.Categorical, kind: pd.Categorical) -> np.ndarray:
    """HTA's types, where tracedoc's kinds know better: copies and collectives the name
    patterns miss (nsys names), and cuda_sync waits ("Stream Wait Event"), which HTA's
    patterns call computation but are a stream waiting, not computing."""
    types = hta_kernel_types(names)
    types[in_values(kind, ("memcpy", "memset")) & (types != _COMM)] = _MEMORY
    types[kind == "collective"] = _COMM
    types[kind == "sync"] = _OTHER
    return types


def _union_ns(work: GpuWork, rows: np.ndarray) -> np.ndarray:
    """Per device, the length of the union of the intervals of `rows` (a mask)."""
    out = np.zeros(len(work.devices), np.int64)
    if not rows.any():
        return out
    dev, ts, end = work.device[rows], work.ts[rows], work.end[rows]  # sorted by device, then ts
    reach = pd.Series(end).groupby(dev).cummax().to_numpy()
    first_of_device = np.r_[True, dev[1:] != dev[:-1]]
    # an interval opens a new merged segment when it starts after everything before it ended
    opens = first_of_device | (ts > np.r_[0, reach[:-1]])
    starts = np.flatnonzero(opens)
    seg_end = np.maximum.reduceat(end, starts)
    np.add.at(out, dev[starts], seg_end - ts[starts])
    return out


# ---------------------------------------------------------------- breakdowns

def temporal_breakdown(work: GpuWork) -> tuple[TemporalBreakdown, ...]:
    if not len(work):
        return ()
    n = len(work.devices)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, work.device, work.ts)
    np.maximum.at(last, work.device, work.end)
    span = last - first
    # unions of the types up to each precedence level: the differences are exclusive times
    unions = [_union_ns(work, work.kernel_type <= level) for level in range(len(KERNEL_TYPES))]
    return tuple(
        TemporalBreakdown(artifact=a, device=d, span_ns=int(span[i]), compute_ns=int(unions[0][i]),
                          communication_ns=int(unions[1][i] - unions[0][i]),
                          memory_ns=int(unions[2][i] - unions[1][i]), other_ns=int(unions[3][i] - unions[2][i]),
                          idle_ns=int(span[i] - unions[3][i]))
        for i, (a, d) in enumerate(work.devices))


def comm_compute_overlap(work: GpuWork) -> tuple[CommComputeOverlap, ...]:
    if not len(work):
        return ()
    compute = _union_ns(work, work.kernel_type == _COMPUTE)
    comm = _union_ns(work, work.kernel_type == _COMM)
    either = _union_ns(work, work.kernel_type <= _COMM)
    return tuple(CommComputeOverlap(artifact=a, device=d, compute_ns=int(compute[i]), communication_ns=int(comm[i]),
                                    overlap_ns=int(compute[i] + comm[i] - either[i]))
                 for i, (a, d) in enumerate(work.devices))


def idle_time_breakdown(work: GpuWork) -> tuple[IdleTimeBreakdown, ...]:
    rows = in_values(work.kind, IDLE_KINDS)
    if not rows.any():
        return ()
    dev, stream, ts, end = work.device[rows], work.stream[rows], work.ts[rows], work.end[rows]
    launched_at = work.launch_ts[rows]
    order = np.lexsort((ts, stream, dev))
    dev, stream, ts, end, launched_at = dev[order], stream[order], ts[order], end[order], launched_at[order]
    follows = np.r_[False, (dev[1:] == dev[:-1]) & (stream[1:] == stream[:-1])]
    prev_end = np.r_[0, end[:-1]]
    gap = np.where(follows, ts - prev_end, 0)
    # no launch call in the trace: NO_LAUNCH, never a host wait (as HTA)
    host_wait = follows & (launched_at > prev_end)
    kernel_wait = follows & ~host_wait & (gap < KERNEL_WAIT_NS)
    other = follows & ~host_wait & ~kernel_wait
    lanes = pd.DataFrame({"dev": dev, "stream": stream, "host": np.where(host_wait, gap, 0),
                          "kernel": np.where(kernel_wait, gap, 0), "other": np.where(other, gap, 0)})
    sums = lanes.groupby(["dev", "stream"], sort=True).sum()
    return tuple(IdleTimeBreakdown(artifact=work.devices[d][0], device=work.devices[d][1], stream=int(s),
                                   host_wait_ns=int(r.host), kernel_wait_ns=int(r.kernel), other_ns=int(r.other))
                 for (d, s), r in zip(sums.index, sums.itertuples(index=False)))


def kernel_breakdown(work: GpuWork, top_kernels: int = TOP_KERNELS) -> tuple[KernelBreakdown, ...]:
    if not len(work):
        return ()
    dur = work.end - work.ts
    table = pd.DataFrame({"dev": work.device, "name": work.name, "type": work.kernel_type, "dur": dur})
    stats = (table.groupby(["dev", "name"], observed=True, sort=False)
             .agg(type=("type", "first"), count=("dur", "size"), total=("dur", "sum"), mean=("dur", "mean"),
                  min=("dur", "min"), max=("dur", "max"), std=("dur", "std"))
             .reset_index())
    stats["label"] = stats["name"].astype(str)  # ties in time go alphabetically, whatever the row order
    stats = stats.sort_values(["dev", "total", "label"], ascending=[True, False, True], kind="stable")
    by_type = table.groupby(["dev", "type"], sort=True)["dur"].agg(["size", "sum"])
    out = []
    for i, (artifact, device) in enumerate(work.devices):
        mine = stats[stats["dev"].to_numpy() == i]
        everything = int(mine["total"].sum())
        types = by_type.loc[i]
        totals = tuple(KernelTypeTotal(kernel_type=KERNEL_TYPES[t], count=int(r["size"]), total_ns=int(r["sum"]),
                                       share_pct=round(100.0 * float(r["sum"]) / everything, 2) if everything else 0.0)
                       for t, r in types.iterrows())
        top = tuple(_kernel_stats(r) for r in mine.head(top_kernels).itertuples(index=False))
        rest = mine.iloc[top_kernels:]
        others = None
        if len(rest):
            durations = dur[(work.device == i) & np.isin(work.name.codes, rest["name"].cat.codes.to_numpy())]
            others = KernelStats(name="others", kernel_type="mixed", count=len(durations),
                                 total_ns=int(durations.sum()), mean_ns=float(durations.mean()),
                                 min_ns=int(durations.min()), max_ns=int(durations.max()),
                                 std_ns=float(np.std(durations, ddof=1)) if len(durations) > 1 else 0.0)
        out.append(KernelBreakdown(artifact=artifact, device=device, by_type=totals, top=top, others=others))
    return tuple(out)


def _kernel_stats(row: Any) -> KernelStats:
    std = row.std
    return KernelStats(name=str(row.name), kernel_type=KERNEL_TYPES[row.type], count=int(row.count),
                       total_ns=int(row.total), mean_ns=float(row.mean), min_ns=int(row.min), max_ns=int(row.max),
                       std_ns=0.0 if pd.isna(std) else float(std))


def launch_stats(work: GpuWork) -> tuple[LaunchStats, ...]:
    paired = in_values(work.launch_call, LAUNCH_CALLS)
    if not paired.any():
        return ()
    dev, cpu_ts, cpu_dur = work.device[paired], work.launch_ts[paired], work.launch_dur[paired]
    gpu_dur = (work.end - work.ts)[paired]
    delay = np.maximum(work.ts[paired] - cpu_ts - cpu_dur, 0)
    out = []
    for i, (artifact, device) in enumerate(work.devices):
        mine = dev == i
        if not mine.any():
            continue
        c, g, d = cpu_dur[mine], gpu_dur[mine], delay[mine]
        out.append(LaunchStats(artifact=artifact, device=device, cpu_duration=_summary(c), gpu_duration=_summary(g),
                               launch_delay=_summary(d), gpu_shorter_than_launch=int((g < c).sum()),
                               long_launches=int((c > LONG_LAUNCH_NS).sum()),
                               delayed_launches=int((d > LAUNCH_DELAY_NS).sum())))
    return tuple(out)


def _summary(values: np.ndarray) -> Summary:
    p50, p95 = np.percentile(values, [50, 95])
    return Summary(count=len(values), mean_ns=float(values.mean()), p50_ns=float(p50), p95_ns=float(p95),
                   max_ns=int(values.max()), total_ns=int(values.sum()))
