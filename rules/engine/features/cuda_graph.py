"""CUDA Graph capture failures that need more than one event to see.

A capture region runs from cudaStreamBeginCapture to cudaStreamEndCapture on one thread.
A synchronising call inside it (`.item()`, `.cpu()`, cudaStreamSynchronize, a blocking
memcpy) is illegal during capture: CUDA invalidates the capture, and PyTorch then
asks for the error string. `capture_aborts` finds those calls even when no log was kept.

In the default global capture mode a call that is unsafe during capture breaks the capture
whichever host thread makes it (a metrics poller's `.item()`, a DataLoader pin-memory
thread's cudaHostAlloc). That thread gets cudaErrorStreamCaptureUnsupported; the capturing
thread only sees cudaErrorStreamCaptureInvalidated on its next call. `capture_conflicts`
tells this apart from a host sync inside the captured code, so the two are one incident.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import distinct_text, parse_attrs as _attrs, text_values
from rules.engine.features import feature

SYNC_RUNTIME = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
                "cudaMemcpy2D", "cudaStreamQuery", "cudaMallocHost", "cudaHostAlloc")
SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::tolist", "aten::nonzero",
            "aten::_to_copy", "aten::to", "aten::cpu", "aten::masked_select", "aten::unique")


def _named(ctx, kinds: tuple[str, ...], names) -> np.ndarray:
    """Sorted row numbers of the events of `kinds` named one of `names`."""
    rows = ctx.index.rows(*kinds)
    return rows[ctx.index.name_in(rows, names)]


def capture_regions(ctx) -> list[tuple[int, int, int, int]]:
    """(pid, tid, begin_ts, end_ts) of every capture region."""
    ev = ctx.events
    rows = _named(ctx, ("runtime",), ["cudaStreamBeginCapture", "cudaStreamEndCapture"])
    if not len(rows):
        return []
    rt = ev.iloc[rows]
    regions = []
    for (pid, tid), g in rt.sort_values("ts").groupby(["pid", "tid"], sort=False, observed=True):
        begin = None
        for name, ts, dur in zip(text_values(g["name"]), g["ts"], g["dur"]):
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
    regions = capture_regions(ctx)
    # the few rows any region can hold, found once: sync ops, sync calls, error-string calls
    candidates = {"ops": _named(ctx, ("cpu_op",), SYNC_OPS), "calls": _named(ctx, ("runtime",), SYNC_RUNTIME),
                  "errors": _named(ctx, ("runtime",), ("cudaGetErrorString",))} if regions else {}
    for pid, tid, lo, hi in regions:
        inside = {what: _in_thread(ctx, rows_, pid, tid, lo, hi) for what, rows_ in candidates.items()}
        ops, calls = ev.iloc[inside["ops"]], ev.iloc[inside["calls"]]
        if ops.empty and calls.empty:
            continue
        culprit = ops.sort_values(["ts", "dur"], ascending=[True, False]).iloc[0] if len(ops) else calls.iloc[0]
        errors = len(inside["errors"])
        row = culprit.to_dict()
        row.update(kind="graph", name=str(culprit["name"]), attrs=json.dumps({
            "culprit": str(culprit["name"]),
            "calls": sorted(distinct_text(calls["name"])),
            "capture_begin_ts": lo, "capture_end_ts": hi,
            "error_string_calls": errors,
            "text": f"{culprit['name']} called {(int(culprit['ts']) - lo) / 1e6:.3f} ms after cudaStreamBeginCapture "
                    f"on pid {pid} tid {tid}; synchronising runtime calls inside the capture: "
                    f"{', '.join(sorted(distinct_text(calls['name']))) or 'none'}",
        }))
        rows.append(row)
    if not rows:
        return ev.iloc[0:0]
    return pd.DataFrame(rows).astype({"ts": np.int64, "dur": np.int64})


def _in_thread(ctx, rows: np.ndarray, pid: int, tid: int, lo: int, hi: int, other_threads: bool = False) -> np.ndarray:
    """The `rows` of process `pid` strictly inside (lo, hi), on thread `tid` (or on any other)."""
    index = ctx.index
    ts, tids = index.column("ts", rows), index.column("tid", rows)
    same = tids != tid if other_threads else tids == tid
    return rows[(index.column("pid", rows) == pid) & same & (ts > lo) & (ts < hi)]


# --- a capture broken by another host thread ----------------------------------------------
# Errors CUDA returns to the call that breaks a capture, and the follow-on error every later
# call of the capturing thread gets (including capture_end).
VIOLATIONS = ("cudaErrorStreamCaptureUnsupported", "cudaErrorStreamCaptureImplicit")
INVALIDATED = "cudaErrorStreamCaptureInvalidated"
# runtime calls that break a global-mode capture when another thread makes them
UNSAFE_RUNTIME = SYNC_RUNTIME + ("cudaMalloc", "cudaFree", "cudaEventQuery", "cudaFreeHost", "cudaMallocAsync")
_THREAD_ENTRY = ("_bootstrap_inner", "_bootstrap")


def _base(path) -> str:
    return str(path).replace("\\", "/").rsplit("/", 1)[-1]


def _frames_text(a: dict) -> str:
    """The raising statement and its frame: "`x.item()` (serve.py:53 in poll)"."""
    frames = a.get("frames") or []
    last = frames[-1] if frames else None
    where = f"{_base(last['file'])}:{last['line']} in {last['func']}" if last else ""
    stmt = a.get("raising_statement") or ""
    return f"`{stmt}` ({where})" if stmt and where else (f"`{stmt}`" if stmt else where)


def _same_process(a: pd.Series, b: pd.Series) -> bool:
    return a["artifact"] == b["artifact"] and (a["pid"] < 0 or b["pid"] < 0 or a["pid"] == b["pid"])


def _other_thread_reason(u: pd.Series, ua: dict, heads: list[tuple[pd.Series, dict]]) -> str:
    """Why the violation `u` came from a thread other than the capturing one ("" if it did not)."""
    if ua.get("capture_site"):
        return ""  # the violating call itself ran inside the captured code
    if ua.get("surfaced_by") == "nccl_watchdog":
        return ("it was raised in ProcessGroupNCCL's watchdog thread, which polls the events of collectives "
                "enqueued before the capture (cudaEventQuery): in global capture mode that query from another "
                "thread breaks the capture")
    if "in pin memory thread" in str(ua.get("text") or ""):
        return "DataLoader re-raised it from its pin-memory thread (pinned host allocations during a global-mode capture)"
    peers = [(i, ia) for i, ia in heads if _same_process(u, i)]
    if not peers:
        return ""
    thread = ua.get("thread") or ""
    if thread and any((ia.get("thread") or "") != thread for _, ia in peers):
        return f"its traceback is printed for thread \"{thread}\", the capture failed in another thread"
    if any(f.get("func") in _THREAD_ENTRY for f in ua.get("frames") or []):
        return "its traceback starts in threading.py (a worker thread), not in the captured code"
    # both are tracebacks, and the capturing thread's own first error is 901 at an ordinary call
    ordinary = [(i, ia) for i, ia in peers if ia.get("frames") and not ia.get("capture_site")]
    if ordinary and ua.get("frames"):
        i, ia = ordinary[0]
        return (f"the capturing thread never got that error: its first error ({i['loc']}) is "
                f"{INVALIDATED} at an ordinary call, {_frames_text(ia) or 'inside the captured code'}")
    return ""


def _log_conflicts(ctx) -> list[dict]:
    ev = ctx.events
    errors = ev.iloc[_named(ctx, ("error",), VIOLATIONS + (INVALIDATED, "CaptureOtherThread"))]
    if errors.empty:
        return []
    decoded = [(row, _attrs(row["attrs"])) for _, row in errors.iterrows()]
    violations = [(r, a) for r, a in decoded if str(r["name"]) in VIOLATIONS]
    invalid = [(r, a) for r, a in decoded if str(r["name"]) == INVALIDATED]
    chained_to = {a.get("chained_after") for _, a in invalid if a.get("chained_after")}
    heads = [(r, a) for r, a in invalid if not a.get("chained_after") or a.get("chained_after") not in
             {str(v["loc"]) for v, _ in violations}]
    rows = []
    for u, ua in violations:
        if str(u["loc"]) in chained_to:
            continue  # capture_end's error was raised while handling this one: the same thread
        why = _other_thread_reason(u, ua, heads)
        if why:
            if "pin memory thread" in why:
                ua = {**ua, "thread": ua.get("thread") or "pin memory thread"}
            if ua.get("surfaced_by") == "nccl_watchdog":
                ua = {**ua, "thread": ua.get("thread") or "ProcessGroupNCCL watchdog",
                      "raising_statement": ua.get("raising_statement") or "cudaEventQuery"}
            capture = next((ia["capture_site"] for i, ia in invalid if _same_process(u, i) and ia.get("capture_site")), "")
            rows.append(_conflict_row(u, ua.get("thread") or "", _frames_text(ua) or str(u["name"]), capture, why))
    if not rows:
        rows += _interleaved_thread_conflicts(ctx, violations, invalid, chained_to)
    for r, a in decoded:
        if str(r["name"]) != "CaptureOtherThread":
            continue
        call = next((ua.get("call") for u, ua in violations if _same_process(u, r) and ua.get("call")
                     and (ua.get("thread") or "") == (a.get("thread") or "")), "")
        rows.append(_conflict_row(r, a.get("thread") or "", call or "a CUDA call", "",
                                  f"the runtime says so: \"{a.get('detail', '')[:160]}\""))
    return rows


_THREAD_HEADER = re.compile(r"Exception in thread (.{1,120}?):\s*$")


def _interleaved_thread_conflicts(ctx, violations: list, invalid: list, chained_to: set) -> list[dict]:
    """Two threads' tracebacks written to one stderr at once interleave line by line, so no
    traceback can be attributed to a thread. What survives: Python's "Exception in thread X:"
    header, a capture-violation error outside the captured code, and the capture's invalidation."""
    if not violations or not invalid:
        return []
    ev = ctx.events
    logs = ev.iloc[ctx.index.rows("log")]
    logs = logs[logs["attrs"].str.contains("Exception in thread", regex=False, na=False).to_numpy(dtype=bool)]
    rows = []
    for _, h in logs.iterrows():
        m = _THREAD_HEADER.search(str(_attrs(h["attrs"]).get("text") or ""))
        at = _line(h["loc"])
        if not m or m.group(1) == "MainThread" or at is None:
            continue
        after = [(u, ua) for u, ua in violations if u["artifact"] == h["artifact"] and (_line(u["loc"]) or 0) > at
                 and not ua.get("capture_site") and str(u["loc"]) not in chained_to]
        if not after or not any(i["artifact"] == h["artifact"] for i, _ in invalid):
            continue
        u, ua = after[0]
        call = _thread_function(ev, h["artifact"], at, _line(u["loc"]) or at) or _frames_text(ua) or str(u["name"])
        capture = next((ia.get("capture_site") for i, ia in invalid if ia.get("capture_site")), "")
        rows.append(_conflict_row(u, m.group(1), call, capture,
                                  f"Python reports an uncaught exception in thread \"{m.group(1)}\" (line {at}) and "
                                  f"{u['name']} ({u['loc']}) was raised outside the captured code"))
    return rows


def _thread_function(ev: pd.DataFrame, artifact: str, start: int, end: int) -> str:
    """The thread's own code: the first frame after threading.py's entry frames, between its header and its error."""
    tbs = ev[(ev["artifact"] == artifact) & (ev["kind"] == "error")]
    for loc, raw in zip(tbs["loc"], tbs["attrs"]):
        at = _line(loc)
        if at is None or not start < at <= end:
            continue
        frames = _attrs(raw).get("frames") or []
        if any(f.get("func") in _THREAD_ENTRY + ("run",) for f in frames):
            own = [f for f in frames if f.get("func") not in _THREAD_ENTRY + ("run",)]
            if own:
                f = own[0]
                return f"a call in {f['func']} ({_base(f['file'])}:{f['line']})"
    return ""


def _line(loc) -> int | None:
    m = re.match(r"line (\d+)", str(loc))
    return int(m.group(1)) if m else None


def _trace_conflicts(ctx) -> list[dict]:
    """Profiler view: inside one thread's capture region, another thread of the same process
    made an unsafe runtime call and then asked for an error string."""
    ev = ctx.events
    rows: list[dict] = []
    regions = capture_regions(ctx)
    if not regions:
        return rows
    unsafe = _named(ctx, ("runtime",), UNSAFE_RUNTIME)
    error_strings = _named(ctx, ("runtime",), ("cudaGetErrorString",))
    for pid, tid, lo, hi in regions:
        calls = ev.iloc[_in_thread(ctx, unsafe, pid, tid, lo, hi, other_threads=True)]
        failed_calls = ev.iloc[_in_thread(ctx, error_strings, pid, tid, lo, hi, other_threads=True)]
        for other, g in calls.groupby("tid", sort=False, observed=True):
            failed = failed_calls[failed_calls["tid"] == other]
            if failed.empty:
                continue
            culprit = g.sort_values("ts").iloc[0]
            why = (f"{culprit['name']} on thread {other} {(int(culprit['ts']) - lo) / 1e6:.3f} ms after "
                   f"thread {tid} began capturing, followed by an error on that thread")
            rows.append(_conflict_row(culprit, str(other), str(culprit["name"]),
                                      f"cudaStreamEndCapture on thread {tid}", why))
    return rows


def _conflict_row(src: pd.Series, thread: str, call: str, capture: str, why: str) -> dict:
    row = src.to_dict()
    who = (f"thread \"{thread}\"" if thread and not thread.isdigit()
           else f"thread {thread}" if thread else "another thread")
    row.update(kind="graph", name="CaptureInvalidatedByOtherThread", attrs=json.dumps({
        "other_thread": thread or "unnamed", "other_thread_text": who, "call": call,
        "capture_site": capture or "a point this log does not show", "why": why,
        "text": f"{who} made {call} while another thread was capturing a CUDA Graph; {why}",
    }))
    return row


@feature("capture_conflicts", doc="CUDA Graph captures invalidated by a call from another host thread (one row "
         "per offending call), from logs (a capture-violation error outside the capturing thread, "
         "\"... initiated from another thread\") or the profiler (an unsafe runtime call on another thread "
         "inside a capture region): attrs.other_thread, other_thread_text, call, capture_site, why.")
def capture_conflicts(ctx) -> pd.DataFrame:
    ev = ctx.events
    rows = _log_conflicts(ctx) + _trace_conflicts(ctx)
    if not rows:
        return ev.iloc[0:0]
    return pd.DataFrame(rows).astype({"ts": np.int64, "dur": np.int64})
