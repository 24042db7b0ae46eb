"""CUDA Graph capture, seen from a profiler trace alone.

A capture region runs from cudaStreamBeginCapture to cudaStreamEndCapture on one thread.
A synchronising call inside it (`.item()`, `.cpu()`, cudaStreamSynchronize, a blocking
memcpy) is illegal during capture: CUDA invalidates the capture, and PyTorch then
asks for the error string. This finds those calls even when no log was kept.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rules.features import feature

SYNC_RUNTIME = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                "cudaMemcpy2D", "cudaStreamQuery", "cudaMallocHost", "cudaHostAlloc")
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::tolist", "aten::nonzero",
            "aten::_to_copy", "aten::to", "aten::cpu", "aten::masked_select", "aten::unique")


def _regions(ev: pd.DataFrame) -> list[tuple[int, int, int, int]]:
    """(pid, tid, begin_ts, end_ts) of every capture region."""
    rt = ev[(ev["kind"] == "runtime") & ev["name"].isin(["cudaStreamBeginCapture", "cudaStreamEndCapture"])]
    regions = []
    for (pid, tid), g in rt.sort_values("ts").groupby(["pid", "tid"], sort=False, observed=True):
        begin = None
        for name, ts, dur in zip(g["name"].astype(str), g["ts"], g["dur"]):
            if name == "cudaStreamBeginCapture":
                begin = ts
            elif begin is not None:
                regions.append((pid, tid, int(begin), int(ts + dur)))
                begin = None
        if begin is not None:  # capture never ended inside the trace
            regions.append((pid, tid, int(begin), int(ev["ts"].max())))
    return regions


@feature("capture_aborts", doc="Synchronising calls inside a CUDA Graph capture region (one row per region "
         "that has one): name = the outermost culprit (e.g. aten::item), attrs: culprit, calls, "
         "capture_begin_ts, error_string_calls.")
def capture_aborts(ctx) -> pd.DataFrame:
    ev = ctx.events
    rows = []
    for pid, tid, lo, hi in _regions(ev):
        inside = ev[(ev["pid"] == pid) & (ev["tid"] == tid) & (ev["ts"] > lo) & (ev["ts"] < hi)]
        ops = inside[(inside["kind"] == "cpu_op") & inside["name"].isin(SYNC_OPS)]
        calls = inside[(inside["kind"] == "runtime") & inside["name"].isin(SYNC_RUNTIME)]
        if ops.empty and calls.empty:
            continue
        culprit = ops.sort_values(["ts", "dur"], ascending=[True, False]).iloc[0] if len(ops) else calls.iloc[0]
        errors = int(((inside["kind"] == "runtime") & (inside["name"] == "cudaGetErrorString")).sum())
        row = culprit.to_dict()
        row.update(kind="graph", name=str(culprit["name"]), attrs=json.dumps({
            "culprit": str(culprit["name"]),
            "calls": sorted(set(calls["name"].astype(str))),
            "capture_begin_ts": lo, "capture_end_ts": hi,
            "error_string_calls": errors,
            "text": f"{culprit['name']} called {(int(culprit['ts']) - lo) / 1e6:.3f} ms after cudaStreamBeginCapture "
                    f"on pid {pid} tid {tid}; synchronising runtime calls inside the capture: "
                    f"{', '.join(sorted(set(calls['name'].astype(str)))) or 'none'}",
        }))
        rows.append(row)
    if not rows:
        return ev.iloc[0:0]
    return pd.DataFrame(rows).astype({"ts": np.int64, "dur": np.int64})
