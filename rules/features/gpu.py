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

import numpy as np
import pandas as pd

from rules.features import category_mask, distinct_text, feature

STREAM_SYNCS = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D", "hipStreamSynchronize")
DEVICE_SYNCS = ("cudaDeviceSynchronize", "hipDeviceSynchronize")
SCALAR_READS = ("aten::item", "aten::tolist")
SHORT_GAP_NS = 200_000     # a gap a launch or one eager op's dispatch explains
LONG_GAP_NS = 1_000_000    # a gap where the host did something else
INPUT_OPS = ("DataLoader", "dataloader", "_next_data", "__next__", "collate", "fetch")
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "hipLaunchKernel", "hipExtModuleLaunchKernel")


def steady_window(ctx) -> tuple[int, int, int] | None:
    """(start, end, steps) of the steady state, from decode steps; else the kernel span."""
    steps = ctx.feature("decode_steps")
    steady = steps[~steps["cold"]] if not steps.empty else steps
    if len(steady) >= 2:
        return int(steady["ts"].iloc[0]), int(steady["ts"].iloc[-1] + steady["dur"].iloc[-1]), len(steady)
    ev = ctx.events
    k = ev[ev["kind"] == "kernel"]
    if k.empty:
        return None
    return int(k["ts"].min()), int((k["ts"] + k["dur"]).max()), 0


def _kernel_window(ctx):
    """(lo, hi, steps, kernels, busy ns, gaps) of the steady window; None when it has under
    ten kernels (too few to say how busy the GPU is)."""
    win = steady_window(ctx)
    if win is None:
        return None
    lo, hi, steps = win
    ev = ctx.events
    # communication kernels occupy the GPU too (HTA counts them): a rank waiting in an
    # all-reduce is not idle
    on_gpu = (ev["kind"] == "kernel") | ((ev["kind"] == "collective") & (ev["stream"] >= 0))
    k = ev[on_gpu & (ev["ts"] >= lo) & (ev["ts"] < hi)]
    if len(k) < 10 or hi <= lo:
        return None
    starts = k["ts"].to_numpy(np.int64)
    busy, gaps = _busy_and_gaps(starts, starts + k["dur"].to_numpy(np.int64))
    return lo, hi, steps, k, busy, gaps


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
    lo, hi, steps, k, busy, gaps = window
    launch_calls = ev[(ev["kind"] == "runtime") & ev["name"].isin(LAUNCH_CALLS) & (ev["ts"] >= lo) & (ev["ts"] < hi)]
    launches = int(len(launch_calls))
    graphs = int(((ev["kind"] == "runtime") & (ev["name"] == "cudaGraphLaunch") & (ev["ts"] >= lo) & (ev["ts"] < hi)).sum())
    row = k.iloc[[0]].copy()
    row["ts"], row["dur"] = lo, hi - lo
    row["kind"], row["name"] = "sample", "gpu_activity"
    frac = busy / (hi - lo)
    row["value"] = frac
    row["attrs"] = json.dumps({
        "busy_pct": round(100 * frac, 1), "kernels": int(len(k)),
        "kernels_per_step": round(len(k) / steps, 1) if steps else None,
        "median_kernel_us": round(float(np.median(k["dur"])) / 1e3, 2),
        "launches": launches, "launch_share_pct": round(100 * float(launch_calls["dur"].sum()) / (hi - lo), 1),
        "text": f"{len(k)} kernels over {(hi - lo) / 1e6:.1f} ms of steady state, GPU busy {100 * frac:.1f}%, "
                f"median kernel {float(np.median(k['dur'])) / 1e3:.2f} us, {launches} launch calls",
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
    inside = ev[(ev["ts"] >= lo) & (ev["ts"] < hi)]
    rt = inside[inside["kind"] == "runtime"]
    stream = rt[rt["name"].isin(STREAM_SYNCS)]
    device = rt[rt["name"].isin(DEVICE_SYNCS)]
    copies = inside[inside["kind"] == "memcpy"]
    pageable = copies[category_mask(copies["name"], lambda names: names.str.contains("Pageable", regex=False))]
    scalars = inside[(inside["kind"] == "cpu_op") & inside["name"].isin(SCALAR_READS)]
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
         "host (input, sync or other: where the host spent most of the gap time), input_pct, sync_pct, "
         "top_host_ops (name -> ms inside the gaps), steps.")
def gpu_idle_gaps(ctx) -> pd.DataFrame:
    ev = ctx.events
    window = _kernel_window(ctx)
    if window is None:
        return ev.iloc[0:0]
    lo, hi, steps, k, busy, bounds = window
    bounds = bounds[(bounds[:, 1] - bounds[:, 0]) >= LONG_GAP_NS]
    if not len(bounds):
        return ev.iloc[0:0]
    idle = int((bounds[:, 1] - bounds[:, 0]).sum())
    host = _host_time_in(ev, bounds)
    input_ns = sum(v for n, v in host.items() if any(t in n for t in INPUT_OPS))
    sync_ns = sum(v for n, v in host.items() if n in STREAM_SYNCS + DEVICE_SYNCS + SCALAR_READS)
    verdict = "input" if input_ns >= 0.3 * idle else "sync" if sync_ns >= 0.3 * idle else "other"
    top_name = max(host, key=host.get) if host else ""
    longest = int(np.argmax(bounds[:, 1] - bounds[:, 0]))
    top = dict(sorted(host.items(), key=lambda kv: -kv[1])[:5])
    row = k.iloc[[0]].copy()
    row["ts"], row["dur"] = int(bounds[longest, 0]), int(bounds[longest, 1] - bounds[longest, 0])
    row["kind"], row["name"], row["value"] = "sample", "gpu_idle_gaps", idle / (hi - lo)
    row["attrs"] = json.dumps({
        "long_gaps": int(len(bounds)), "kernels": int(len(k)), "idle_ms": round(idle / 1e6, 1), "window_ms": round((hi - lo) / 1e6, 1),
        "idle_pct": round(100 * idle / (hi - lo), 1), "busy_pct": round(100 * busy / (hi - lo), 1),
        "longest_gap_ms": round(float(row["dur"].iloc[0]) / 1e6, 2), "host": verdict,
        "input_pct": round(100 * input_ns / idle, 1), "sync_pct": round(100 * sync_ns / idle, 1),
        "top_host_ops": {n: round(v / 1e6, 2) for n, v in top.items()}, "steps": steps,
        "verdict": _IDLE_VERDICTS[verdict].format(pct=round(100 * max(input_ns, sync_ns) / idle), op=top_name),
        "text": f"{len(bounds)} gaps of 1 ms or more with no kernel running, {idle / 1e6:.1f} ms of "
                f"{(hi - lo) / 1e6:.1f} ms; longest {row['dur'].iloc[0] / 1e6:.1f} ms here",
    })
    return row


_IDLE_VERDICTS = {
    "input": "the host was in the input pipeline (DataLoader) for {pct}% of that time: the job is input-bound",
    "sync": "the host was waiting in synchronising calls for {pct}% of that time: it stalls on the GPU, then "
            "has nothing queued",
    "other": "the host was busy elsewhere (most time in `{op}`): host-side work between kernels starves the GPU",
}
MAX_GAPS_EXAMINED = 200  # the longest gaps carry the idle time; bounds the interval join
SHORT_OP_NS = 10_000_000  # host ops up to 10 ms are joined to the gaps by a sorted search


def _host_time_in(ev: pd.DataFrame, bounds: np.ndarray) -> dict[str, int]:
    """Host op/runtime time (ns) inside the gaps, by name; outermost ops only would need the
    call tree, so nested ops are counted under each name (shares, not a partition)."""
    order = np.argsort(bounds[:, 0] - bounds[:, 1])[:MAX_GAPS_EXAMINED]
    g = bounds[np.sort(order)]
    # three columns of the host rows, not a copy of every column (attrs text included)
    keep = (ev["kind"].isin(("cpu_op", "runtime", "annotation", "sync")) & (ev["dur"] > 0)).to_numpy()
    if not keep.any():
        return {}
    s = ev["ts"].to_numpy(np.int64)[keep]
    e = s + ev["dur"].to_numpy(np.int64)[keep]
    codes = ev["name"].cat.codes.to_numpy()[keep]  # per name without materialising the strings
    sums = np.zeros(len(ev["name"].cat.categories))
    # Short ops overlap a gap only if they start at most SHORT_OP_NS before it: a sorted search
    # finds them; the few long ones (steps, big annotations) are tested against every gap.
    short = (e - s) <= SHORT_OP_NS
    order = np.argsort(s[short], kind="stable")
    ss, se, sc = s[short][order], e[short][order], codes[short][order]
    ls, le, lc = s[~short], e[~short], codes[~short]
    for lo, hi in g:
        a, b = np.searchsorted(ss, lo - SHORT_OP_NS), np.searchsorted(ss, hi)
        for st, en, cd in ((ss[a:b], se[a:b], sc[a:b]), (ls, le, lc)):
            inside = (st < hi) & (en > lo)
            if inside.any():
                overlap = np.minimum(en[inside], hi) - np.maximum(st[inside], lo)
                sums += np.bincount(cd[inside], weights=overlap, minlength=len(sums))
    names = ev["name"].cat.categories
    return {str(names[c]): int(sums[c]) for c in np.nonzero(sums)[0]}
