"""Why an allocation failed: per-process cap, fragmentation, capacity, or undetermined.

The figures come from the OOM message (PyTorch prints request R, capacity T, free F, in use
by this process P, allowed cap, allocated A, reserved-but-unallocated U) and, when a memory
snapshot is in the trace, from the allocator's own `oom` action and segments.

- process cap:   the device had room (F >= R) or a cap far below capacity is printed
- capacity:      the request alone exceeds the device, or live tensors + request exceed what
                 the process could ever hold (A + R > F + Rsv)
- fragmentation: the cache alone could hold the request (U >= R), or free + cached memory could with a
                 margin (R + margin <= F + U), yet no block was big enough. The allocator frees every
                 cached segment with no live block and retries before it raises, so the U it reports is
                 held in segments split among live tensors: a U above R that could not serve it is
                 fragmentation however small a share of the device it is.
"""
from __future__ import annotations

import json
import re

import pandas as pd

from ingest.engine.trace_frame import in_values, parse_attrs as _attrs, text_values
from rules.engine.features import feature
from rules.engine.features.cuda_graph import capture_regions
from rules.engine.quantities import human_bytes

ABSURD_REQUEST_BYTES = 2**42     # 4 TiB: more than any one GPU has, so the size itself is wrong
MATERIAL_CACHE_SHARE = 0.10     # U / reserved at or above this is a real cache, not a rounding
CAP_SHARE = 0.95                # an "allowed" figure below this share of capacity is a cap
# free memory must exceed the request by this much before "the device had room" holds: the
# allocator rounds requests up and the driver keeps some memory for itself
ROOM_MARGIN_BYTES = 64 * 2**20
ROOM_MARGIN_SHARE = 0.01
# An OOM message or traceback that says it ran inside CUDA Graph capture (the 2.1+ message's
# "private pools (e.g., CUDA Graphs)" figure alone does not: graphs captured earlier keep it)
CAPTURE_TEXT = re.compile(r"capture cuda graph|cuda_graph_runner|torch/cuda/graphs\.py|capture_(?:begin|end|model)\b|"
                          r"cudagraph_trees|make_graphed_callables|cudagraph|graph capture|during capture|"
                          r"stream is capturing|capturing (?:cuda ?graphs?|cudagraphs?)|"
                          r"instantiat\w{0,4} (?:a |the )?(?:cuda|gpu) graph|cu(?:da)?GraphInstantiate|end stream capture",
                          re.I)
CAPTURE_ENDED = "The CUDA Graph is empty"  # torch.cuda.graphs' warning after capture_end() of an empty graph
CAPTURE_WINDOW_LINES = 5000     # a capture-start log line this close before the OOM, with no end between
GIB = 2**30
CAUSE_LABELS = {"process_cap": "a per-process memory cap", "capacity": "the device's capacity",
                "fragmentation": "allocator fragmentation", "undetermined": "undetermined"}
CAPTURE_ADVICE = {
    "process_cap": "Raise the cap the process runs under (the allowed figure: "
                   "`torch.cuda.set_per_process_memory_fraction`, `gpu_memory_utilization` / `--mem-fraction-static`, "
                   "the MIG slice or container limit), or capture fewer/smaller graphs under it.",
    "capacity": "Leave memory for capture: lower `gpu_memory_utilization` / `--mem-fraction-static` so the KV cache "
                "leaves room, capture fewer batch sizes (vLLM `cudagraph_capture_sizes` / `--max-seq-len-to-capture`, "
                "SGLang `--cuda-graph-max-bs`), or run eager (`--enforce-eager` / `--disable-cuda-graph`).",
    "fragmentation": "Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` and share one memory pool across "
                     "captures (`torch.cuda.graph(..., pool=...)`) so capture can reuse cached blocks.",
    "undetermined": "Keep the full OOM message (free, allocated, reserved-but-unallocated) of the failed capture: "
                    "it decides between a cap, capacity and fragmentation.",
}


# What to keep next time so an undetermined OOM can be decided, by who reported it
NEXT_CAPTURE = {
    "torch": "Keep the complete OOM message (free, in use, allocated, reserved-but-unallocated) and a memory snapshot "
             "(`torch.cuda.memory._record_memory_history()` then `torch.cuda.memory._dump_snapshot()`).",
    "nccl": "NCCL allocates its buffers outside PyTorch's caching allocator, from whatever the device has left: log "
            "`nvidia-smi` and `torch.cuda.memory_reserved()` when communicators are created, leave headroom "
            "(`torch.cuda.empty_cache()` before the first collective, lower `gpu_memory_utilization` / "
            "`--mem-fraction-static`), and shrink NCCL's buffers (`NCCL_BUFFSIZE`, `NCCL_NVLS_ENABLE=0`).",
    "jax/xla": "Keep XLA's allocator statistics (the BFC \"Stats:\" block, or `jax.devices()[0].memory_stats()` "
               "before the failing call) and check `XLA_PYTHON_CLIENT_MEM_FRACTION` / `XLA_PYTHON_CLIENT_PREALLOCATE`; "
               "`XLA_PYTHON_CLIENT_ALLOCATOR=platform` shows whether fragmentation is involved.",
    "tensorflow": "Keep the BFC allocator's dump (the \"Stats:\" block with Limit and InUse, logged before the error) "
                  "or run with `report_tensor_allocations_upon_oom`; check `per_process_gpu_memory_fraction` / "
                  "`set_memory_growth`.",
}
NEXT_CAPTURE["tensorflow/xla (BFC allocator)"] = NEXT_CAPTURE["tensorflow"]


def _next_capture(a: dict) -> str:
    framework = str(a.get("framework") or "torch")
    return NEXT_CAPTURE.get(framework) or NEXT_CAPTURE["torch"]


def _snapshot_figures(ev: pd.DataFrame) -> dict:
    snap = ev[(ev["source"] == "memory_snapshot") & (ev["kind"] == "sample")]
    out = {}
    for name, key in (("memory.reserved", "reserved"), ("memory.allocated", "allocated_by_pytorch"),
                      ("memory.reserved_unallocated", "reserved_unallocated"),
                      ("memory.largest_free_block", "largest_free_block"),
                      ("memory.segments", "segments"),
                      ("memory.segments_with_live_block", "segments_with_live_block"),
                      ("memory.expandable_segments", "expandable_segments"),
                      ("memory.segment_mapped", "segment_mapped"),
                      ("memory.segment_unmapped", "segment_unmapped")):
        vals = snap.loc[snap["name"] == name, "value"]
        if len(vals):
            out[key] = float(vals.sum()) if key != "largest_free_block" else float(vals.max())
    return out


def _b(n: float) -> str:
    return human_bytes(n)


def _snapshot_detail(f: dict, request: float) -> str:
    """What a memory snapshot adds: the largest hole and the segments nothing can release."""
    if f.get("expandable_segments"):
        return _expandable_detail(f)
    parts = []
    if f.get("largest_free_block") is not None:
        parts.append(f"the largest free block was {f['largest_free_block'] / 2**20:.0f} MiB for a "
                     f"{request / 2**20:.0f} MiB request")
    if f.get("segments") and f.get("segments_with_live_block") is not None:
        parts.append(f"{int(f['segments_with_live_block']):,} of {int(f['segments']):,} segments still hold a live "
                     "tensor, so emptying the cache cannot return them")
    return " (" + "; ".join(parts) + ")" if parts else ""


def _expandable_detail(f: dict) -> str:
    """Expandable segments grow and shrink by mapping pages (segment_map / segment_unmap), so a
    free block does not bound a request and emptying the cache unmaps free pages even beside live
    tensors: what the snapshot shows is the pages mapped when it was taken, and the history's
    mapping counts say how it got there."""
    mapped, unmapped = f.get("segment_mapped"), f.get("segment_unmapped")
    history = (f"; the recorded history mapped {_b(mapped or 0)} and unmapped {_b(unmapped or 0)} of their pages"
               if mapped is not None or unmapped is not None else
               "; the recorded history holds no segment_map / segment_unmap action, so how they grew is not accounted")
    return (f" ({int(f['expandable_segments']):,} of {int(f.get('segments') or 0):,} segments are expandable: the reserved "
            f"figures count the pages mapped when the snapshot was taken{history})")


def classify(f: dict) -> tuple[str, str]:
    """(cause, reason) from the figures of one OOM (bytes; missing keys allowed)."""
    R, T, F = f.get("tried_to_allocate"), f.get("total_capacity"), f.get("free")
    A, U, cap = f.get("allocated_by_pytorch"), f.get("reserved_unallocated"), f.get("allowed")
    Rsv = f.get("reserved") or ((A or 0) + (U or 0) if A is not None and U is not None else None)
    if R is None:
        return "undetermined", "the request size is not in the evidence"
    if R >= ABSURD_REQUEST_BYTES and not (T and R <= T):
        return "capacity", (f"the request ({_b(R)}) is larger than any GPU's memory: a size computed wrongly "
                            "(a shape, overflow or corrupted length), which no setting can serve")
    if T and R > T:
        # no free figure (a unified-memory "free" above the card's total included) can serve it
        return "capacity", f"the request ({_b(R)}) is larger than the whole device ({_b(T)})"
    if cap is not None and T and cap < CAP_SHARE * T:
        return "process_cap", (f"the process may use only {_b(cap)} of the device's {_b(T)} "
                               f"(a per-process cap){f', while {_b(F)} was free on the device' if F else ''}")
    reservable = f.get("reservable")
    if reservable is not None and F is not None:  # XLA: free vs what is contiguous at the bottom of memory
        if R > F:
            return "capacity", f"only {_b(F)} was free for a {_b(R)} request"
        return "fragmentation", (f"{_b(F)} was free, enough for the {_b(R)} request, but only {_b(reservable)} of it "
                                 "could be reserved in one piece")
    fits = F if F is not None and F >= R and F > 0 else None  # the free figure, where it holds the request
    if fits is not None and fits - R >= max(ROOM_MARGIN_BYTES, ROOM_MARGIN_SHARE * (T or 0)):
        return "process_cap", (f"the device still had {_b(fits)} free, more than the {_b(R)} "
                               "requested: something capped this process (memory fraction, MIG slice, container)")
    # free memory too thin to count as room says nothing when the cache alone could hold the request
    if fits is not None and not (U is not None and Rsv and U >= R):
        return "capacity", (f"the {_b(R)} request needs nearly all of the {_b(fits)} free"
                            f"{f' of {_b(T)}' if T else ''}: the {_b(fits - R)} left over is less than the "
                            "allocator's rounding and the driver's own needs, so the device is effectively full")
    if U is not None and Rsv:
        share = U / Rsv
        room = (F or 0) + U
        if R <= room and share >= MATERIAL_CACHE_SHARE:
            return "fragmentation", (f"{_b(U)} ({share:.0%} of the {_b(Rsv)} reserved) was cached "
                                     f"but unallocated, enough for the {_b(R)} request, yet no free block "
                                     "was large enough" + _snapshot_detail(f, R))
        if U >= R > 0:
            # the allocator retries after freeing every cached segment that holds no tensor: what stays
            # cached is split among live blocks, so a cache larger than the request that still could
            # not serve it is fragmentation, whatever share of the device it is
            return "fragmentation", (f"{_b(U)} was cached but unallocated ({share:.1%} of the {_b(Rsv)} reserved), "
                                     f"more than the {_b(R)} request, yet the allocator's free-and-retry found no "
                                     "block large enough: the cache is split among live tensors"
                                     + _snapshot_detail(f, R))
        margin = max(ROOM_MARGIN_BYTES, ROOM_MARGIN_SHARE * (T or 0))
        if R + margin <= room and U >= margin:
            return "fragmentation", (f"{_b(F or 0)} free on the device plus {_b(U)} cached but unallocated "
                                     f"({share:.0%} of the {_b(Rsv)} reserved) is {_b(room)}, enough for the "
                                     f"{_b(R)} request, yet no free block or region was large enough: the memory "
                                     "left is in pieces" + _snapshot_detail(f, R))
        if R > room:
            return "capacity", (f"live tensors hold {_b(A or Rsv - U)}; free plus cached memory ({_b(room)}) "
                                f"cannot hold the {_b(R)} request")
        return "capacity", (f"live tensors hold {_b(A or Rsv - U)}; the {_b(U)} cached but unused is only {share:.1%} "
                            f"of the {_b(Rsv)} reserved, so the device is full and defragmenting it would only "
                            f"postpone the failure of this {_b(R)} request")
    if F is not None and T:
        return "capacity", f"only {_b(F)} of {_b(T)} was free for a {_b(R)} request"
    missing = [name for key, name in (("free", "free"), ("total_capacity", "total capacity"),
                                      ("allocated_by_pytorch", "allocated"),
                                      ("reserved_unallocated", "reserved-but-unallocated")) if f.get(key) is None]
    return "undetermined", f"the evidence gives the {_b(R)} request but not the {', '.join(missing)} figure(s)"


FIGURE_KEYS = ("tried_to_allocate", "total_capacity", "free", "in_use_by_process", "allowed",
               "allocated_by_pytorch", "reserved_unallocated", "reserved")
# the profiler's [OutOfMemory] instant event names its figures differently
KINETO_KEYS = {"Bytes": "tried_to_allocate", "Total Allocated": "allocated_by_pytorch", "Total Reserved": "reserved"}
SAME_REQUEST_BYTES = 2 * 2**20   # requests this close (or within SAME_REQUEST_SHARE) are the same
SAME_REQUEST_SHARE = 0.03
SOURCE_PREFERENCE = {"log": 0, "memory_snapshot": 1, "kineto": 2}  # whose text leads the evidence


def _figures(row, a: dict, snap: dict, stats: dict | None = None) -> dict:
    figures = {k: a[k] for k in FIGURE_KEYS if isinstance(a.get(k), (int, float))}
    for raw, key in KINETO_KEYS.items():
        if isinstance(a.get(raw), (int, float)):
            figures.setdefault(key, a[raw])
    if isinstance(a.get("reservable"), (int, float)):
        figures["reservable"] = a["reservable"]
    if row["source"] == "memory_snapshot":
        if row["value"] == row["value"]:
            figures.setdefault("tried_to_allocate", row["value"])
        if isinstance(a.get("device_free"), (int, float)):
            figures.setdefault("free", a["device_free"])
        for k, v in snap.items():
            figures.setdefault(k, v)
    for k, v in _stats_figures(stats or {}).items():
        figures.setdefault(k, v)
    return figures


def _stats_figures(stats: dict) -> dict:
    """An allocator's own statistics in the OOM's terms. A TF/XLA BFC pool of `limit` bytes with
    `in_use` bytes live: what is not in use is the pool's cache (reserved but unallocated)."""
    out = {k: stats[k] for k in ("tried_to_allocate", "free", "total_capacity", "allocated_by_pytorch", "allowed")
           if k in stats}
    limit, in_use = stats.get("limit"), stats.get("in_use")
    if in_use is not None:
        out.setdefault("allocated_by_pytorch", in_use)
    if limit and in_use is not None:  # limit 0: cuda_malloc_async has no pool of its own
        out.update(reserved=limit, reserved_unallocated=max(limit - in_use, 0))
    if stats.get("largest_free_block"):
        out["largest_free_block"] = stats["largest_free_block"]
    return out


STATS_BEFORE_LINES = 200_000    # a BFC dump (one line per chunk) precedes the error it explains
STATS_AFTER_LINES = 40          # cuda_malloc_async prints its stats right after the error


def _with_context(cause: str, reason: str, a: dict, mig: str | None, figures: dict) -> tuple[str, str]:
    """What the log says around the figures: a device that is a MIG slice is a cap the process
    runs under (its "total capacity" is the slice); accelerate giving up on every batch size means
    even one sample does not fit."""
    mig = mig or a.get("mig_profile") or ""
    if mig and cause in ("capacity", "undetermined"):
        total = f" of {_b(figures['total_capacity'])}" if figures.get("total_capacity") else ""
        return "process_cap", (f"the GPU is a MIG {mig} slice: the process may use only that slice{total} of the "
                               f"physical device" + (f", and {reason}" if cause == "capacity" else
                                                     f"; {_bare_reason(a, figures) or reason}"))
    if a.get("batch_search_exhausted") and cause == "undetermined":
        return "capacity", ("accelerate's find_executable_batch_size halved the batch after every out-of-memory until "
                            "none was left: even the smallest batch does not fit next to the model's fixed memory "
                            "(weights, gradients, optimizer state)")
    return cause, reason


def _allocator_stats(ev: pd.DataFrame) -> dict[str, list[tuple[int, int, dict]]]:
    """AllocatorStats rows (see logs.oom.allocator_fact) by artifact: (line, pid, figures)."""
    rows = ev[(ev["kind"] == "log") & (ev["name"] == "AllocatorStats")]
    out: dict[str, list[tuple[int, int, dict]]] = {}
    for art, loc, pid, raw in zip(rows["artifact"], rows["loc"], rows["pid"], rows["attrs"]):
        line = _line_no(loc)
        if line is not None:
            out.setdefault(str(art), []).append((line, int(pid), _attrs(raw)))
    return out


def _stats_near(row: dict, stats: list[tuple[int, int, dict]], oom_lines: list[int]) -> dict:
    """The statistics printed around one OOM: between the previous and the next OOM of the same
    log, nearest first, from the same process where the lines say which."""
    at = _line_no(row.get("loc", ""))
    if at is None or not stats:
        return {}
    lo = max([n for n in oom_lines if n < at], default=at - STATS_BEFORE_LINES)
    hi = min([n for n in oom_lines if n > at], default=at + STATS_AFTER_LINES)
    pid = int(row.get("pid", -1))
    near = [(abs(n - at), a) for n, p, a in stats
            if max(lo, at - STATS_BEFORE_LINES) < n < min(hi, at + STATS_AFTER_LINES + 1)
            and (pid < 0 or p < 0 or p == pid)]
    out: dict = {}
    for _, a in sorted(near, key=lambda t: t[0]):
        for k, v in a.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.setdefault(k, v)
    return out


_BARE_WORDING = {"cuda_error": "the CUDA runtime's bare \"out of memory\"",
                 "library_alloc": "a CUDA library's workspace allocation failure (e.g. CUBLAS_STATUS_ALLOC_FAILED)",
                 "nccl": "NCCL's own device allocation failure (\"Cuda failure 'out of memory'\")",
                 "tensorrt": "TensorRT's device allocation failure",
                 "torch_async": "a torch.OutOfMemoryError without the caching allocator's figures",
                 "nvml_assert": ("PyTorch's \"NVML_SUCCESS == r\" assert in CUDACachingAllocator, raised while it was "
                                 "composing an out-of-memory message (NVML could not list the GPU's processes, as in "
                                 "MIG slices and some containers)")}


def _bare_reason(a: dict, figures: dict) -> str:
    """The reason for OOMs whose wording carries no allocator figures (see logs.oom)."""
    wording = a.get("wording")
    what = f"the {_b(figures['tried_to_allocate'])} request" if figures.get("tried_to_allocate") else "no request size"
    if wording in _BARE_WORDING:
        return f"the error is {_BARE_WORDING[wording]}, which prints {what} and no free/allocated figures"
    if wording in ("xla", "tensorflow", "bfc") and "free" not in figures:
        what = f"the {_b(figures['tried_to_allocate'])} request" if figures.get("tried_to_allocate") else "the failure"
        return (f"{a.get('framework', wording)} reports {what} but not how much device memory was free, "
                "reserved or in use")
    return ""


def _line_no(loc: str) -> int | None:
    m = re.match(r"line (\d+)", str(loc))
    return int(m.group(1)) if m else None


def _in_log_capture_window(near: "_LogContext", row: dict) -> str:
    """A capture-start line ("Capturing CUDA graphs", "Capture cuda graph begin") shortly before
    the OOM in the same log and process, with no capture-end line in between."""
    no = _line_no(row.get("loc", ""))
    if no is None:
        return ""
    last = None
    for name, at, pid in near.capture_marks(str(row["artifact"])):
        if at is None or at >= no or no - at > CAPTURE_WINDOW_LINES:
            continue
        if row.get("pid", -1) >= 0 and pid >= 0 and pid != row["pid"]:
            continue
        if last is None or at > last[0]:
            last = (at, name)
    return f"after the capture-start line at line {last[0]}" if last and last[1] == "CudagraphCaptureStart" else ""


def _chained_capture_error(near: "_LogContext", row: dict) -> str:
    """A capture error (e.g. capture_end's cudaErrorStreamCaptureInvalidated) chained to this OOM."""
    hit = near.chained_capture_errors().get((str(row["artifact"]), row.get("loc")))
    return f"{hit[0]} at {hit[1].get('capture_site') or 'capture end'} was raised while handling it" if hit else ""


class _LogContext:
    """The log lines the capture checks read around each OOM, indexed once per diagnosis: an OOM
    that filtered the whole event table (and parsed every error's attrs) for each check made a
    log with a few hundred OOMs quadratic (a 20 MB log: 100 s)."""

    def __init__(self, ev: pd.DataFrame, rows_checked: list[dict]):
        self.ev = ev
        self._chained: dict | None = None
        self._marks: dict[str, list] | None = None
        lines = (_line_no(r.get("loc", "")) for r in rows_checked)
        wanted = {f"line {n - k}" for n in lines if n is not None for k in (1, 2)}
        rows = ev[in_values(ev["loc"], wanted)]
        self._by_line: dict[tuple[str, str], list] = {}
        for pos, (art, loc, raw) in enumerate(zip(text_values(rows["artifact"]), rows["loc"], rows["attrs"])):
            self._by_line.setdefault((art, loc), []).append((pos, raw))

    def chained_capture_errors(self) -> dict[tuple[str, str | None], tuple[str, dict]]:
        """(artifact, loc of the OOM) -> the first error raised during capture while handling it."""
        if self._chained is None:
            errors = self.ev[self.ev["kind"] == "error"]
            self._chained = {}
            for art, name, raw in zip(text_values(errors["artifact"]), text_values(errors["name"]), errors["attrs"]):
                a = _attrs(raw)
                after = a.get("chained_after")
                if a.get("during_cuda_graph_capture") and (after is None or isinstance(after, str)):
                    self._chained.setdefault((art, after), (name, a))
        return self._chained

    def capture_marks(self, artifact: str) -> list[tuple[str, int | None, int]]:
        """(name, line, pid) of the artifact's capture start/end lines, in table order."""
        if self._marks is None:
            marks = self.ev[in_values(self.ev["name"], ["CudagraphCaptureStart", "CudagraphCaptureEnd"])]
            self._marks = {}
            for art, name, loc, pid in zip(text_values(marks["artifact"]), text_values(marks["name"]),
                                           marks["loc"], marks["pid"]):
                self._marks.setdefault(art, []).append((name, _line_no(loc), pid))
        return self._marks.get(artifact, [])

    def attrs_at(self, artifact: str, locs: tuple[str, ...]) -> list:
        """The raw attrs of the artifact's rows at these locs, in table order."""
        found = [item for loc in locs for item in self._by_line.get((artifact, loc), ())]
        return [raw for _, raw in sorted(found, key=lambda item: item[0])]


def _in_profiled_capture(row: dict, regions: list[tuple[int, int, int, int]]) -> str:
    if row.get("source") != "kineto":
        return ""
    ts = int(row["ts"])
    hit = next(((pid, lo) for pid, _, lo, hi in regions if pid == row.get("pid") and lo <= ts <= hi), None)
    return (f"the profiler shows it {((ts - hit[1]) / 1e6):.3f} ms after cudaStreamBeginCapture on pid {hit[0]}"
            if hit else "")


def _capture_evidence(near: _LogContext, group: list, regions: list) -> str:
    """Why this OOM counts as raised inside CUDA Graph capture ("" when nothing says so)."""
    if any(_capture_ended_above(near, row) for row, _, _ in group):
        return ""  # torch warned from capture_end() just before: that capture is over (and recorded nothing)
    for _row, a, _ in group:
        if a.get("capture_site"):
            return f"the traceback runs through {a['capture_site']}"
        text = str(a.get("text") or a.get("message") or "")
        m = CAPTURE_TEXT.search(text)
        if m:
            return f"the error says \"{m.group(0)}\""
    for row, a, _ in group:
        for check in (_chained_capture_error(near, row), _in_log_capture_window(near, row),
                      _announced_capture(near, row),
                      _in_profiled_capture(row, regions), _graph_frames_with_pool(a)):
            if check:
                return check
    return ""


def _mentions_graph_capture(text: str) -> bool:
    """Plain substring tests (no backtracking on long lines): "cudagraph", or capture and graph."""
    low = text.lower()
    return "cudagraph" in low or "cuda_graph" in low or ("captur" in low and "graph" in low)


def _capture_ended_above(near: _LogContext, row: dict) -> bool:
    """The lines right above the OOM (or its traceback) hold capture_end()'s empty-graph warning."""
    no = _line_no(row.get("loc", ""))
    if no is None:
        return False
    return any(CAPTURE_ENDED in str(_attrs(raw).get("text") or "")
               for raw in near.attrs_at(str(row["artifact"]), tuple(f"line {no - k}" for k in (1, 2, 3))))


def _announced_capture(near: _LogContext, row: dict) -> str:
    """The line right above the OOM's traceback says a graph is being captured."""
    no = _line_no(row.get("loc", ""))
    if no is None:
        return ""
    for raw in near.attrs_at(str(row["artifact"]), (f"line {no - 1}", f"line {no - 2}")):
        text = str(_attrs(raw).get("text") or "")
        if _mentions_graph_capture(text) and "If out-of-memory" not in text:
            return f"the line above it says \"{text.strip()[:120]}\""
    return ""


def _graph_frames_with_pool(a: dict) -> str:
    """The traceback's own code is about capturing graphs and the message shows memory already in
    CUDA Graph private pools (the capture's allocations so far)."""
    pools = a.get("private_pools")
    if not pools:
        return ""
    hit = next((f["func"] for f in a.get("frames") or [] if "captur" in f.get("func", "").lower()
                or _mentions_graph_capture(f.get("func", ""))), "")
    if not hit and _mentions_graph_capture(str(a.get("raising_statement") or "")):
        hit = a["raising_statement"]
    return f"it was raised in {hit} with {_b(pools)} already in CUDA Graph private pools" if hit else ""


def _same_request(a: float | None, b: float | None) -> bool:
    """The allocator rounds requests (to 2 MiB blocks) and messages round what they print."""
    return a is not None and b is not None and abs(a - b) <= max(SAME_REQUEST_BYTES, SAME_REQUEST_SHARE * max(a, b))


ECHO_LINES = 200_000     # a tool's own line and the exception it raises can sit a whole dump apart
ADJACENT_LINES = 5       # a message and the line that gives its size ("Failed to CUDA calloc N bytes")


def _process(row: dict, a: dict) -> tuple[int, object]:
    return int(row.get("pid", -1)), a.get("rank")


def _echoes(prev: tuple[dict, dict, dict], row: dict, a: dict, figures: dict) -> bool:
    """Is `row` the same failure as `prev`, the previous OOM of the same log, printed again? Tools
    print one OOM more than once: XLA's log line then the Python exception, TF's op_kernel warning
    then ResourceExhaustedError, a BFC "ran out of memory" line before either, a worker's traceback
    relayed by its engine, NCCL's warning repeated per retry."""
    p_row, p_a, p_fig = prev
    at, p_at = _line_no(row.get("loc", "")), _line_no(p_row.get("loc", ""))
    if at is None or p_at is None or not 0 <= at - p_at <= ECHO_LINES:
        return False
    (pid, rank), (p_pid, p_rank) = _process(row, a), _process(p_row, p_a)
    if (pid >= 0 and p_pid >= 0 and pid != p_pid) or (rank is not None and p_rank is not None and rank != p_rank):
        return False
    r, p_r = figures.get("tried_to_allocate"), p_fig.get("tried_to_allocate")
    if r is not None and p_r is not None:
        return _same_request(r, p_r)
    if r is None and p_r is None:
        return a.get("wording") == p_a.get("wording")
    return at - p_at <= ADJACENT_LINES


def _incidents(ooms: pd.DataFrame, snap: dict, stats: dict | None = None) -> list[list[tuple[dict, dict, dict]]]:
    """OOM rows grouped by failure. The log, the profiler and the snapshot each report every
    failure once, in order, so the k-th failure of a size in one artifact is the k-th of that
    size in the others; log lines without a time of their own cannot be matched by time. Within
    one log, an OOM that repeats the previous one (`_echoes`) is that failure again."""
    stats = stats or {}
    oom_lines: dict[str, list[int]] = {}
    for art, loc in zip(ooms["artifact"], ooms["loc"]):
        if (n := _line_no(loc)) is not None:
            oom_lines.setdefault(str(art), []).append(n)
    groups: list[list[tuple[dict, dict, dict]]] = []
    last_in: dict[str, int] = {}     # artifact -> index of the group its latest OOM joined
    for _, row in ooms.sort_values("ts", kind="stable").iterrows():
        a = _attrs(row["attrs"])
        art = str(row["artifact"])
        near = _stats_near(row.to_dict(), stats.get(art, []), oom_lines.get(art, [])) if row["source"] == "log" else {}
        figures = _figures(row, a, snap, near)
        item = (row.to_dict(), a, figures)
        g = last_in.get(art)
        if g is not None and _echoes(next(x for x in reversed(groups[g]) if str(x[0]["artifact"]) == art),
                                     item[0], a, figures):
            groups[g].append(item)
            continue
        for i, group in enumerate(groups):
            if (all(str(r["artifact"]) != art for r, _, _ in group)
                    and _same_request(figures.get("tried_to_allocate"), group[0][2].get("tried_to_allocate"))):
                group.append(item)
                last_in[art] = i
                break
        else:
            groups.append([item])
            last_in[art] = len(groups) - 1
    return groups


@feature("oom_analysis", doc="One row per out-of-memory failure with its figures and verdict; the same "
         "failure seen by a log, the profiler and a memory snapshot is one row whose figures merge all three. "
         "attrs.cause is process_cap | fragmentation | capacity | undetermined (cause_label in words); attrs.in_capture "
         "is true when the OOM was raised inside CUDA Graph capture and attrs.capture_evidence says how that is "
         "known (traceback, capture-start log line, profiler capture region); attrs.reason explains the verdict; "
         "attrs.seen_in lists the artifacts. One failure printed several times in a log (XLA's line then the "
         "exception, a BFC warning then the error) is one row (attrs.printed); allocator statistics printed around "
         "it (TF/XLA Stats blocks, cuda_malloc_async free/total, NCCL's calloc size) add to its figures; "
         "attrs.next_capture says what to keep to decide an undetermined one.")
def oom_analysis(ctx) -> pd.DataFrame:
    ev = ctx.events
    ooms = ev.iloc[ctx.index.rows("oom")]
    if ooms.empty:
        return ooms
    snap = _snapshot_figures(ev)
    regions = capture_regions(ctx)
    rows = []
    stats = _allocator_stats(ev)
    mig = {art: next((a["mig_profile"] for _, _, a in rows if a.get("mig_profile")), "") for art, rows in stats.items()}
    groups = list(_incidents(ooms, snap, stats))
    near = _LogContext(ev, [r for group in groups for r, _, _ in group])
    for group in groups:
        group.sort(key=lambda item: SOURCE_PREFERENCE.get(str(item[0]["source"]), 9))
        row, a, _ = group[0]
        figures: dict = {}
        for _, _, f in group:
            for k, v in f.items():
                figures.setdefault(k, v)
        cause, reason = classify(figures)
        cause, reason = _with_context(cause, reason, a, mig.get(str(row["artifact"])), figures)
        if cause == "undetermined":
            reason = _bare_reason(a, figures) or reason
        if figures.get("expandable_segments") and "expandable" not in reason:
            reason += _expandable_detail(figures)  # whatever the cause, say what the snapshot's figures count
        capture = _capture_evidence(near, group, regions)
        seen_in = sorted({str(r["artifact"]) for r, _, _ in group})
        if not a.get("text"):  # dumps and profiler events carry numbers, not a message: say them
            a = {**a, "text": "out of memory: " + ", ".join(
                f"{k.replace('_', ' ')} {_b(v)}" for k, v in figures.items()
                if k in FIGURE_KEYS) + f" (seen in {', '.join(seen_in)})"}
        request = figures.get("tried_to_allocate")
        row["attrs"] = json.dumps({**a, **figures, "cause": cause, "reason": reason, "in_capture": bool(capture),
                                   "capture_evidence": capture, "cause_label": CAUSE_LABELS[cause],
                                   "capture_advice": CAPTURE_ADVICE[cause],
                                   "request_text": f"a {_b(request)} request" if request else
                                   "an allocation whose size the message does not give",
                                   "seen_in": seen_in, "printed": len(group), "next_capture": _next_capture(a),
                                   "figures_gib": {k: round(v / GIB, 2) for k, v in figures.items()
                                                   if k not in ("segments", "segments_with_live_block",
                                                                "expandable_segments")}})
        rows.append(row)
    return pd.DataFrame(rows)
