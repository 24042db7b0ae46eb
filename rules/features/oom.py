"""Why an allocation failed: per-process cap, fragmentation, capacity, or undetermined.

The figures come from the OOM message (PyTorch prints request R, capacity T, free F, in use
by this process P, allowed cap, allocated A, reserved-but-unallocated U) and, when a memory
snapshot is in the trace, from the allocator's own `oom` action and segments.

- process cap:   the device had room (F >= R) or a cap far below capacity is printed
- capacity:      the request alone exceeds the device, or live tensors + request exceed what
                 the process could ever hold (A + R > F + Rsv)
- fragmentation: the request would fit in free + cached memory (R <= F + U) and the cache is a
                 material share of what is reserved, yet no block was big enough
A rule that says "fragmentation" on R < U alone is wrong when U is a sliver of the pool.
"""
from __future__ import annotations

import json

import pandas as pd

from rules.features import feature, parse_attrs as _attrs
from rules.quantities import human_bytes

MATERIAL_CACHE_SHARE = 0.10     # U / reserved at or above this is a real cache, not a rounding
CAP_SHARE = 0.95                # an "allowed" figure below this share of capacity is a cap
CAPTURE_MARKERS = ("capture cuda graph", "cuda_graph_runner", "torch/cuda/graphs.py", "capture_begin",
                   "cudagraph", "graph capture")
GIB = 2**30


def _snapshot_figures(ev: pd.DataFrame) -> dict:
    snap = ev[(ev["source"] == "memory_snapshot") & (ev["kind"] == "sample")]
    out = {}
    for name, key in (("memory.reserved", "reserved"), ("memory.allocated", "allocated_by_pytorch"),
                      ("memory.reserved_unallocated", "reserved_unallocated"),
                      ("memory.largest_free_block", "largest_free_block"),
                      ("memory.segments", "segments"),
                      ("memory.segments_with_live_block", "segments_with_live_block")):
        vals = snap.loc[snap["name"] == name, "value"]
        if len(vals):
            out[key] = float(vals.sum()) if key != "largest_free_block" else float(vals.max())
    return out


def _b(n: float) -> str:
    return human_bytes(n)


def _snapshot_detail(f: dict, request: float) -> str:
    """What a memory snapshot adds: the largest hole and the segments nothing can release."""
    parts = []
    if f.get("largest_free_block") is not None:
        parts.append(f"the largest free block was {f['largest_free_block'] / 2**20:.0f} MiB for a "
                     f"{request / 2**20:.0f} MiB request")
    if f.get("segments") and f.get("segments_with_live_block") is not None:
        parts.append(f"{int(f['segments_with_live_block']):,} of {int(f['segments']):,} segments still hold a live "
                     "tensor, so emptying the cache cannot return them")
    return " (" + "; ".join(parts) + ")" if parts else ""


def classify(f: dict) -> tuple[str, str]:
    """(cause, reason) from the figures of one OOM (bytes; missing keys allowed)."""
    R, T, F = f.get("tried_to_allocate"), f.get("total_capacity"), f.get("free")
    A, U, cap = f.get("allocated_by_pytorch"), f.get("reserved_unallocated"), f.get("allowed")
    Rsv = f.get("reserved") or ((A or 0) + (U or 0) if A is not None and U is not None else None)
    if R is None:
        return "undetermined", "the request size is not in the evidence"
    if cap is not None and T and cap < CAP_SHARE * T:
        return "process_cap", (f"the process may use only {_b(cap)} of the device's {_b(T)} "
                               f"(a per-process cap){f', while {_b(F)} was free on the device' if F else ''}")
    if F is not None and F >= R and F > 0:
        return "process_cap", (f"the device still had {_b(F)} free, more than the {_b(R)} "
                               "requested: something capped this process (memory fraction, MIG slice, container)")
    if T and R > T:
        return "capacity", f"the request ({_b(R)}) is larger than the whole device ({_b(T)})"
    if U is not None and Rsv:
        share = U / Rsv
        room = (F or 0) + U
        if R <= room and share >= MATERIAL_CACHE_SHARE:
            return "fragmentation", (f"{_b(U)} ({share:.0%} of the {_b(Rsv)} reserved) was cached "
                                     f"but unallocated, enough for the {_b(R)} request, yet no free block "
                                     "was large enough" + _snapshot_detail(f, R))
        return "capacity", (f"live tensors hold {_b(((A or Rsv - U)))}; free plus cached memory "
                            f"({_b(room)}) " + ("cannot hold" if R > room else "is only a sliver next to")
                            + f" the {_b(R)} request")
    if F is not None and T:
        return "capacity", f"only {_b(F)} of {_b(T)} was free for a {_b(R)} request"
    return "undetermined", "the message is cut before the free/allocated/reserved figures"


FIGURE_KEYS = ("tried_to_allocate", "total_capacity", "free", "in_use_by_process", "allowed",
               "allocated_by_pytorch", "reserved_unallocated", "reserved")
# the profiler's [OutOfMemory] instant event names its figures differently
KINETO_KEYS = {"Bytes": "tried_to_allocate", "Total Allocated": "allocated_by_pytorch", "Total Reserved": "reserved"}
SAME_REQUEST_BYTES = 2 * 2**20   # requests this close (or within SAME_REQUEST_SHARE) are the same
SAME_REQUEST_SHARE = 0.03
SOURCE_PREFERENCE = {"log": 0, "memory_snapshot": 1, "kineto": 2}  # whose text leads the evidence


def _figures(row, a: dict, snap: dict) -> dict:
    figures = {k: a[k] for k in FIGURE_KEYS if isinstance(a.get(k), (int, float))}
    for raw, key in KINETO_KEYS.items():
        if isinstance(a.get(raw), (int, float)):
            figures.setdefault(key, a[raw])
    if row["source"] == "memory_snapshot":
        if row["value"] == row["value"]:
            figures.setdefault("tried_to_allocate", row["value"])
        if isinstance(a.get("device_free"), (int, float)):
            figures.setdefault("free", a["device_free"])
        for k, v in snap.items():
            figures.setdefault(k, v)
    return figures


def _same_request(a: float | None, b: float | None) -> bool:
    """The allocator rounds requests (to 2 MiB blocks) and messages round what they print."""
    return a is not None and b is not None and abs(a - b) <= max(SAME_REQUEST_BYTES, SAME_REQUEST_SHARE * max(a, b))


def _incidents(ooms: pd.DataFrame, snap: dict) -> list[list[tuple[dict, dict, dict]]]:
    """OOM rows grouped by failure. The log, the profiler and the snapshot each report every
    failure once, in order, so the k-th failure of a size in one artifact is the k-th of that
    size in the others; log lines without a time of their own cannot be matched by time."""
    groups: list[list[tuple[dict, dict, dict]]] = []
    for _, row in ooms.sort_values("ts", kind="stable").iterrows():
        a = _attrs(row["attrs"])
        figures = _figures(row, a, snap)
        for group in groups:
            if (all(r["artifact"] != row["artifact"] for r, _, _ in group)
                    and _same_request(figures.get("tried_to_allocate"), group[0][2].get("tried_to_allocate"))):
                group.append((row.to_dict(), a, figures))
                break
        else:
            groups.append([(row.to_dict(), a, figures)])
    return groups


@feature("oom_analysis", doc="One row per out-of-memory failure with its figures and verdict; the same "
         "failure seen by a log, the profiler and a memory snapshot is one row whose figures merge all three. "
         "attrs.cause is process_cap | fragmentation | capacity | undetermined; attrs.in_capture is true when "
         "the OOM was raised inside CUDA Graph capture; attrs.reason explains the verdict; attrs.seen_in lists "
         "the artifacts.")
def oom_analysis(ctx) -> pd.DataFrame:
    ev = ctx.events
    ooms = ev[ev["kind"] == "oom"]
    if ooms.empty:
        return ooms
    snap = _snapshot_figures(ev)
    rows = []
    for group in _incidents(ooms, snap):
        group.sort(key=lambda item: SOURCE_PREFERENCE.get(str(item[0]["source"]), 9))
        row, a, _ = group[0]
        figures: dict = {}
        for _, _, f in group:
            for k, v in f.items():
                figures.setdefault(k, v)
        cause, reason = classify(figures)
        text = " ".join(str(x.get("text") or x.get("message") or "") for _, x, _ in group).lower()
        in_capture = any(m in text for m in CAPTURE_MARKERS)
        seen_in = sorted({str(r["artifact"]) for r, _, _ in group})
        if not a.get("text"):  # dumps and profiler events carry numbers, not a message: say them
            a = {**a, "text": "out of memory: " + ", ".join(
                f"{k.replace('_', ' ')} {_b(v)}" for k, v in figures.items()
                if k in FIGURE_KEYS) + f" (seen in {', '.join(seen_in)})"}
        row["attrs"] = json.dumps({**a, **figures, "cause": cause, "reason": reason, "in_capture": in_capture,
                                   "seen_in": seen_in,
                                   "figures_gib": {k: round(v / GIB, 2) for k, v in figures.items()
                                                   if k not in ("segments", "segments_with_live_block")}})
        rows.append(row)
    return pd.DataFrame(rows)
