"""GPU activity and host synchronisation in the steady state of a profiler trace.

`gpu_activity` says how busy the GPU is while the host drives it: a decode step made of
many tiny kernels with the GPU idle most of the time is launch-bound. `host_syncs` counts
the calls that make the host wait for the GPU each step. One device synchronisation per
step is how a decode loop reads its token back and is not counted as a stall.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rules.features import feature

STREAM_SYNCS = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D", "hipStreamSynchronize")
DEVICE_SYNCS = ("cudaDeviceSynchronize", "hipDeviceSynchronize")
SCALAR_READS = ("aten::item", "aten::tolist")
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


def _busy_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of intervals (kernels on several streams overlap)."""
    if not len(starts):
        return 0
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
    return int((g_end - g_start).sum())


@feature("gpu_activity", doc="GPU busy share in the steady state (one row): value = busy fraction 0..1; "
         "attrs: busy_pct, kernels, kernels_per_step, median_kernel_us, launches, launch_share_pct (host time "
         "inside launch calls), graph_launches, window_ms.")
def gpu_activity(ctx) -> pd.DataFrame:
    win = steady_window(ctx)
    ev = ctx.events
    if win is None:
        return ev.iloc[0:0]
    lo, hi, steps = win
    k = ev[(ev["kind"] == "kernel") & (ev["ts"] >= lo) & (ev["ts"] < hi)]
    if len(k) < 10 or hi <= lo:
        return ev.iloc[0:0]
    starts = k["ts"].to_numpy(np.int64)
    busy = _busy_ns(starts, starts + k["dur"].to_numpy(np.int64))
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
    pageable = copies[copies["name"].astype(str).str.contains("Pageable", regex=False)]
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
        "calls": sorted(set(stream["name"].astype(str)) | set(scalars["name"].astype(str))),
        "text": f"{len(stream)} stream syncs, {len(pageable)} pageable copies, {len(scalars)} scalar reads over "
                f"{steps} steps (first here)",
    })
    return first
