"""GPU activity and host synchronisation in the steady state of a profiler trace.

`gpu_activity` says how busy the GPU is while the host drives it, and how its idle time is
split: many short gaps between tiny kernels (the host cannot launch fast enough:
launch-bound) or few long gaps (the host is busy elsewhere: input pipeline, synchronisation,
Python). It works without step markers: the window is then the span of the kernels.
`host_syncs` counts the calls that make the host wait for the GPU each step. One device
synchronisation per step is how a decode loop reads its token back and is not counted.
"""
from __future__ import annotations

import json
import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import category_mask, distinct_text
from rules.engine.features import feature

STREAM_SYNCS = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D", "hipStreamSynchronize",
                "hipEventSynchronize", "hipMemcpy", "hipMemcpyWithStream", "hipMemcpy2D")
DEVICE_SYNCS = ("cudaDeviceSynchronize", "hipDeviceSynchronize")
SCALAR_READS = ("aten::item", "aten::tolist")
SHORT_GAP_NS = 200_000     # a gap a launch or one eager op's dispatch explains
LONG_GAP_NS = 1_000_000    # a gap where the host did something else
# The input pipeline by name: the DataLoader's annotation and its Python frames (torch/utils/data/...).
# Not a bare `__next__` or `fetch`: other iterators (a transformers pipeline's wraps the whole
# forward pass) and fetches are not input loading.
INPUT_OPS = ("DataLoader", "dataloader", "_next_data", "collate", "utils/data/")
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "hipGraphLaunch")
HOST_CALL_KINDS = ("runtime", "driver")  # cuLaunchKernel(Ex) is a driver call
# Start-up work that leaves the GPU idle once and is gone in the steady state: CUDA-graph
# capture and instantiation (PyTorch, vLLM, SGLang, inductor's cudagraph trees), torch.compile,
# and one-time setup (streams, events, the caching allocator growing, cuDNN autotuning: those
# calls are what the host does while the benchmark runs). By name, in any host row.
WARMUP_OPS = ("BeginCapture", "EndCapture", "GraphInstantiate", "CUDAGraphNode.record", "capture_model",
              "_capture_cudagraph", "capture_", "Capture cuda graph", "cudagraphify", "compile_fx",
              "_compile", "call_user_compiler", "StreamCreate", "EventCreate", "cudaFree", "hipFree",
              "cudaMalloc", "hipMalloc", "cuModuleLoad", "hipModuleLoad", "cudnnFind", "FindConvolution",
              "miopenFind")
LAZY_LOAD_NS = 1_000_000  # a launch call this long is loading its kernel's module (lazy loading)
WARMUP_SHARE = 0.3        # the share of gap time that names what the host was doing


def steady_window(ctx) -> tuple[int, int, int] | None:
    """(start, end, steps) of the steady state, from decode steps; else the kernel span."""
    steps = ctx.feature("decode_steps")
    steady = steps[~steps["cold"]] if not steps.empty else steps
    if len(steady) >= 2:
        return int(steady["ts"].iloc[0]), int(steady["ts"].iloc[-1] + steady["dur"].iloc[-1]), len(steady)
    kernels = ctx.index.rows("kernel")
    if not len(kernels):
        return None
    ts = ctx.index.column("ts", kernels)
    return int(ts.min()), int((ts + ctx.index.column("dur", kernels)).max()), 0


@dataclass(frozen=True)
class KernelWindow:
    """The steady window and the kernels running on the GPU inside it."""
    lo: int
    hi: int
    steps: int
    rows: np.ndarray          # the kernels' row numbers in ctx.events
    durs: np.ndarray          # their durations (ns)
    busy: int                 # union of their intervals (ns)
    gaps: np.ndarray          # (start, end) rows of the idle gaps between them


# gpu_activity and gpu_idle_gaps read the same window: computed once per trace
_WINDOWS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _kernel_window(ctx) -> KernelWindow | None:
    """The steady window's kernels, busy time and gaps; None when it has under ten kernels
    (too few to say how busy the GPU is)."""
    if ctx not in _WINDOWS:
        _WINDOWS[ctx] = _find_kernel_window(ctx)
    return _WINDOWS[ctx]


def _find_kernel_window(ctx) -> KernelWindow | None:
    win = steady_window(ctx)
    if win is None:
        return None
    lo, hi, steps = win
    index = ctx.index
    # communication kernels occupy the GPU too (HTA counts them): a rank waiting in an
    # all-reduce is not idle
    collectives = index.rows("collective")
    collectives = collectives[index.column("stream", collectives) >= 0]
    rows = np.union1d(index.rows("kernel"), collectives) if len(collectives) else index.rows("kernel")
    ts = index.column("ts", rows)
    inside = (ts >= lo) & (ts < hi)
    rows = rows[inside]
    if len(rows) < 10 or hi <= lo:
        return None
    starts, durs = ts[inside], index.column("dur", rows)
    keep, lo, hi = _one_capture(index.codes("artifact", rows), starts, starts + durs, lo, hi)
    if keep is not None:
        rows, starts, durs = rows[keep], starts[keep], durs[keep]
    busy, gaps = _busy_and_gaps(starts, starts + durs)
    return KernelWindow(lo, hi, steps, rows, durs, busy, gaps)


def _one_capture(artifact: np.ndarray, starts: np.ndarray, ends: np.ndarray, lo: int, hi: int):
    """Profiler files whose kernels do not overlap in time are separate captures (another
    run, another job, step 100 and step 200): the time between them was not profiled, so it is
    no idle time. (mask of the kernels to keep or None, window lo, hi): the capture with the
    most kernels, its files overlapping each other (the ranks of one run)."""
    codes = np.unique(artifact)
    if len(codes) < 2:
        return None, lo, hi
    spans = sorted((int(starts[artifact == c].min()), int(ends[artifact == c].max()), c) for c in codes)
    sessions: list[list] = []
    for first, last, code in spans:
        if sessions and first <= sessions[-1][1]:
            sessions[-1][1] = max(sessions[-1][1], last)
            sessions[-1][2].append(code)
        else:
            sessions.append([first, last, [code]])
    if len(sessions) == 1:
        return None, lo, hi
    first, last, members = max(sessions, key=lambda s: int(np.isin(artifact, s[2]).sum()))
    return np.isin(artifact, members), max(lo, first), min(hi, last)


def _busy_and_gaps(starts: np.ndarray, ends: np.ndarray) -> tuple[int, np.ndarray]:
    """(length of the union of the intervals, the gaps between them as (start, end) rows):
    kernels on several streams overlap, so busy time is the union, and a gap is where none runs."""
    if not len(starts):
        return 0, np.empty((0, 2), dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    groups = np.cumsum(new) - 1
    g_start = s[new]
    g_end = np.zeros(groups[-1] + 1, dtype=np.int64)
    np.maximum.at(g_end, groups, e)
    return int((g_end - g_start).sum()), np.column_stack([g_end[:-1], g_start[1:]])


def _gap_attrs(bounds: np.ndarray, window_ns: int) -> dict:
    """How the idle time splits into short (launch-scale) and long (host elsewhere) gaps."""
    gaps = bounds[:, 1] - bounds[:, 0]
    idle = int(gaps.sum())
    short, long_ = gaps[gaps < SHORT_GAP_NS], gaps[gaps >= LONG_GAP_NS]
    return {
        "gaps": int(len(gaps)), "median_gap_us": round(float(np.median(gaps)) / 1e3, 1) if len(gaps) else 0.0,
        "idle_short_pct": round(100 * float(short.sum()) / idle, 1) if idle else 0.0,
        "long_gaps": int(len(long_)), "long_gap_idle_pct": round(100 * float(long_.sum()) / window_ns, 1),
        "longest_gap_ms": round(float(gaps.max()) / 1e6, 2) if len(gaps) else 0.0,
    }


@feature("gpu_activity", doc="GPU busy share in the steady state (one row): value = busy fraction 0..1; "
         "attrs: busy_pct, kernels, kernels_per_step, median_kernel_us, launches, launch_share_pct (host time "
         "inside launch calls), graph_launches, window_ms, steps (0: no step markers, the window is the kernels' "
         "span), gaps, median_gap_us, idle_short_pct (idle time in gaps < 200 us), long_gaps (>= 1 ms), "
         "long_gap_idle_pct (their share of the window), longest_gap_ms.")
def gpu_activity(ctx) -> pd.DataFrame:
    ev = ctx.events
    window = _kernel_window(ctx)
    if window is None:
        return ev.iloc[0:0]
    lo, hi, steps, busy, gaps = window.lo, window.hi, window.steps, window.busy, window.gaps
    index = ctx.index
    runtime = index.rows(*HOST_CALL_KINDS)
    ts = index.column("ts", runtime)
    runtime = runtime[(ts >= lo) & (ts < hi)]
    launch_calls = runtime[index.name_in(runtime, LAUNCH_CALLS)]
    launches = len(launch_calls)
    graphs = int(index.name_in(runtime, GRAPH_LAUNCHES).sum())
    kernels = len(window.rows)
    median_kernel = float(np.median(window.durs))
    row = ev.iloc[[window.rows[0]]].copy()
    row["ts"], row["dur"] = lo, hi - lo
    row["kind"], row["name"] = "sample", "gpu_activity"
    frac = busy / (hi - lo)
    row["value"] = frac
    row["attrs"] = json.dumps({
        "busy_pct": round(100 * frac, 1), "kernels": kernels,
        "kernels_per_step": round(kernels / steps, 1) if steps else None,
        "median_kernel_us": round(median_kernel / 1e3, 2),
        "launches": launches,
        "launch_share_pct": round(100 * float(index.column("dur", launch_calls).sum()) / (hi - lo), 1),
        "text": f"{kernels} kernels over {(hi - lo) / 1e6:.1f} ms of steady state, GPU busy {100 * frac:.1f}%, "
                f"median kernel {median_kernel / 1e3:.2f} us, {launches} launch calls",
        "graph_launches": graphs, "window_ms": round((hi - lo) / 1e6, 1), "steps": steps,
        **_gap_attrs(gaps, hi - lo),
    })
    return row


@feature("host_syncs", doc="Host-blocking calls per steady-state step (one row): value = stream syncs + "
         "pageable copies + scalar reads per step; attrs: stream_syncs, device_syncs, pageable_copies, "
         "scalar_reads, steps, per_step.")
def host_syncs(ctx) -> pd.DataFrame:
    win = steady_window(ctx)
    ev = ctx.events
    if win is None or win[2] == 0:
        return ev.iloc[0:0]
    lo, hi, steps = win
    index = ctx.index

    def inside(rows: np.ndarray) -> np.ndarray:
        ts = index.column("ts", rows)
        return rows[(ts >= lo) & (ts < hi)]

    # the few candidate rows by name first, then copied: never a copy of every row in the window
    runtime = index.rows("runtime")
    stream = ev.iloc[inside(runtime[index.name_in(runtime, STREAM_SYNCS)])]
    device = ev.iloc[inside(runtime[index.name_in(runtime, DEVICE_SYNCS)])]
    memcpy = index.rows("memcpy")
    pageable = memcpy[category_mask(ev["name"].iloc[memcpy], lambda names: names.str.contains("Pageable", regex=False))]
    pageable = ev.iloc[inside(pageable)]
    cpu_ops = index.rows("cpu_op")
    scalars = ev.iloc[inside(cpu_ops[index.name_in(cpu_ops, SCALAR_READS)])]
    blocking = len(stream) + len(pageable) + len(scalars)
    if blocking == 0:
        return ev.iloc[0:0]
    first = pd.concat([stream, pageable, scalars]).sort_values("ts").iloc[[0]].copy()
    first["kind"], first["name"] = "sync", "host_syncs"
    first["value"] = blocking / steps
    first["attrs"] = json.dumps({
        "stream_syncs": int(len(stream)), "device_syncs": int(len(device)), "pageable_copies": int(len(pageable)),
        "pageable_bytes": None, "scalar_reads": int(len(scalars)), "steps": steps,
        "per_step": round(blocking / steps, 2),
        "calls": sorted(set(distinct_text(stream["name"])) | set(distinct_text(scalars["name"]))),
        "text": f"{len(stream)} stream syncs, {len(pageable)} pageable copies, {len(scalars)} scalar reads over "
                f"{steps} steps (first here)",
    })
    return first


@feature("gpu_idle_gaps", doc="Long GPU idle gaps (>= 1 ms, no kernel on any stream) in the steady state, with "
         "what the host was doing meanwhile (one summary row at the longest gap): value = share of the window "
         "the GPU spent in long gaps (0..1); attrs: long_gaps, kernels, idle_ms, window_ms, busy_pct, longest_gap_ms, "
         "host (input, warmup, sync or other: where the host spent most of the gap time), input_pct, sync_pct, "
         "warmup_pct (graph capture, compilation, one-time setup), input_window_pct (the input pipeline's gap time "
         "as a share of the window), top_host_ops (name -> ms inside the gaps), steps.")
def gpu_idle_gaps(ctx) -> pd.DataFrame:
    ev = ctx.events
    window = _kernel_window(ctx)
    if window is None:
        return ev.iloc[0:0]
    lo, hi, steps, busy, bounds = window.lo, window.hi, window.steps, window.busy, window.gaps
    bounds = bounds[(bounds[:, 1] - bounds[:, 0]) >= LONG_GAP_NS]
    if not len(bounds):
        return ev.iloc[0:0]
    idle = int((bounds[:, 1] - bounds[:, 0]).sum())
    host = _host_time_in(ctx, bounds)
    input_ns = _input_time_in(ctx, bounds)
    warmup_ns = _warmup_time_in(ctx, bounds)
    sync_ns = sum(v for n, v in host.items() if n in STREAM_SYNCS + DEVICE_SYNCS + SCALAR_READS)
    verdict = _gap_verdict(idle, input_ns, warmup_ns, sync_ns)
    top_name = max(host, key=lambda n: host[n]) if host else ""
    longest = int(np.argmax(bounds[:, 1] - bounds[:, 0]))
    top = dict(sorted(host.items(), key=lambda kv: -kv[1])[:5])
    row = ev.iloc[[window.rows[0]]].copy()
    row["ts"], row["dur"] = int(bounds[longest, 0]), int(bounds[longest, 1] - bounds[longest, 0])
    row["kind"], row["name"], row["value"] = "sample", "gpu_idle_gaps", idle / (hi - lo)
    row["attrs"] = json.dumps({
        "long_gaps": int(len(bounds)), "kernels": len(window.rows), "idle_ms": round(idle / 1e6, 1), "window_ms": round((hi - lo) / 1e6, 1),
        "idle_pct": round(100 * idle / (hi - lo), 1), "busy_pct": round(100 * busy / (hi - lo), 1),
        "longest_gap_ms": round(float(row["dur"].iloc[0]) / 1e6, 2), "host": verdict,
        "input_pct": round(100 * input_ns / idle, 1), "sync_pct": round(100 * sync_ns / idle, 1),
        "warmup_pct": round(100 * warmup_ns / idle, 1),
        "input_window_pct": round(100 * input_ns / (hi - lo), 1),
        "top_host_ops": {n: round(v / 1e6, 2) for n, v in top.items()}, "steps": steps,
        "verdict": _IDLE_VERDICTS[verdict].format(pct=round(100 * max(input_ns, sync_ns, warmup_ns) / idle),
                                                  op=top_name),
        "text": f"{len(bounds)} gaps of 1 ms or more with no kernel running, {idle / 1e6:.1f} ms of "
                f"{(hi - lo) / 1e6:.1f} ms; longest {row['dur'].iloc[0] / 1e6:.1f} ms here",
    })
    return row


_IDLE_VERDICTS = {
    "input": "the host was in the input pipeline (DataLoader) for {pct}% of that time: the job is input-bound",
    "sync": "the host was waiting in synchronising calls for {pct}% of that time: it stalls on the GPU, then "
            "has nothing queued",
    "other": "the host was busy elsewhere (most time in `{op}`): host-side work between kernels starves the GPU",
    "warmup": "the host was capturing CUDA graphs, compiling or setting up (streams, allocator, autotuning, module "
              "loading) for {pct}% of that time: start-up, not the steady state",
}


def _gap_verdict(idle: int, input_ns: int, warmup_ns: int, sync_ns: int) -> str:
    """What the host did in the long gaps. The input pipeline first: a loader that starves the
    GPU is the finding even in a trace that also holds start-up; start-up next, since a capture
    or a first launch blocks too but is gone in the steady state."""
    if input_ns >= WARMUP_SHARE * idle:
        return "input"
    if warmup_ns >= WARMUP_SHARE * idle:
        return "warmup"
    return "sync" if sync_ns >= WARMUP_SHARE * idle else "other"
MAX_GAPS_EXAMINED = 200  # the longest gaps carry the idle time; bounds the interval join
GAP_JOIN_BLOCK = 1 << 18  # host ops joined with the gaps per pass


def _host_time_in(ctx, bounds: np.ndarray) -> dict[str, int]:
    """Host op/runtime time (ns) inside the gaps, by name; outermost ops only would need the
    call tree, so nested ops are counted under each name (shares, not a partition)."""
    g = _examined_gaps(bounds)
    index = ctx.index
    names = ctx.events["name"].cat.categories
    sums = np.zeros(len(names))
    # kind by kind: the sums do not depend on the order of the ops, and each pass reads only
    # two columns of that kind's rows
    for kind in ("cpu_op", "runtime", "annotation", "sync"):
        rows = index.rows(kind)
        # in blocks: the temporaries stay small and are reused instead of faulted in anew
        for start in range(0, len(rows), GAP_JOIN_BLOCK):
            _add_gap_overlaps(index, rows[start:start + GAP_JOIN_BLOCK], g, sums)
    return {str(names[c]): int(sums[c]) for c in np.nonzero(sums)[0]}


def _input_time_in(ctx, bounds: np.ndarray) -> int:
    """How long (ns) the host was inside the input pipeline during the gaps (the ones
    _host_time_in examines): the union of the INPUT_OPS ops' pieces inside them, so that the
    DataLoader's nested frames (its annotation, `__next__`, `_next_data`, `fetch`, ...) count
    once. Host rows only: a GPU user annotation (a stream) spans kernels, not host work."""
    index = ctx.index
    names = ctx.events["name"].cat.categories
    matching = [n for n in names if any(t in n for t in INPUT_OPS)]
    rows = index.rows("cpu_op", "annotation")
    rows = rows[index.name_in(rows, matching) & (index.column("stream", rows) < 0)] if matching else rows[:0]
    _, starts, ends = _gap_pieces(index, rows, _examined_gaps(bounds))
    return _busy_and_gaps(starts, ends)[0]


def _warmup_time_in(ctx, bounds: np.ndarray) -> int:
    """How long (ns) the host was in start-up work (WARMUP_OPS by name, or a launch call long
    enough to be loading its module) during the examined gaps; each moment once."""
    index = ctx.index
    names = ctx.events["name"].cat.categories
    matching = [n for n in names if any(t in n for t in WARMUP_OPS)]
    rows = index.rows("cpu_op", "annotation", *HOST_CALL_KINDS)
    rows = rows[index.column("stream", rows) < 0]
    named = index.name_in(rows, matching) if matching else np.zeros(len(rows), dtype=bool)
    lazy = index.name_in(rows, LAUNCH_CALLS) & (index.column("dur", rows) >= LAZY_LOAD_NS)
    _, starts, ends = _gap_pieces(index, rows[named | lazy], _examined_gaps(bounds))
    return _busy_and_gaps(starts, ends)[0]


def _examined_gaps(bounds: np.ndarray) -> np.ndarray:
    """The MAX_GAPS_EXAMINED longest gaps, in time order."""
    order = np.argsort(bounds[:, 0] - bounds[:, 1])[:MAX_GAPS_EXAMINED]
    return bounds[np.sort(order)]


def _add_gap_overlaps(index, rows: np.ndarray, g: np.ndarray, sums: np.ndarray) -> None:
    """Add to `sums` (by name code) how long the ops at `rows` overlap the gaps `g`."""
    at, starts, ends = _gap_pieces(index, rows, g)
    if len(at):
        codes = index.codes("name", rows[at])  # per name without materialising the strings
        sums += np.bincount(codes, weights=ends - starts, minlength=len(sums))


def _gap_pieces(index, rows: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the ops at `rows` overlap the gaps `g` (disjoint, in time order): per piece, the
    position in `rows` of its op, and its start and end."""
    s, d = index.column("ts", rows), index.column("dur", rows)
    # an op overlaps any gap iff it ends after the start of the first gap that ends after it
    # starts (one binary search per op instead of a sort)
    first = np.searchsorted(g[:, 1], s, side="right")
    next_start = np.append(g[:, 0], np.iinfo(np.int64).max)[first]  # past the last gap: never reached
    hit = np.flatnonzero((s + d > next_start) & (d > 0))
    s, e, first = s[hit], s[hit] + d[hit], first[hit]
    last = np.searchsorted(g[:, 0], e, side="left")   # the op overlaps the gaps first..last-1
    spans = last - first
    op = np.repeat(np.arange(len(hit)), spans)
    gap = np.repeat(first, spans) + np.arange(int(spans.sum())) - np.repeat(np.cumsum(spans) - spans, spans)
    return hit[op], np.maximum(s[op], g[gap, 0]), np.minimum(e[op], g[gap, 1])
