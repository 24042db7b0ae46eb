"""Host-side hotspots and lock waits from perf / bpftrace captures.

`host_hotspots` groups perf samples by the library family their leaf function belongs to
(the regex engine, the interpreter loop, the allocator, ...), because a hotspot is rarely
one function: CPython's `_sre` spreads its time over sre_ucs1_match, sre_ucs1_charset and
friends. `lock_waits` sums futex waits; waits clustered at CPython's 5 ms switch interval
mean threads queue for the GIL rather than for the program's own lock.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import in_values, text_values
from rules.engine.features import feature

FAMILIES = (
    # sre's \w, \d and [..] classes call the Unicode character-class predicates; perf's
    # frame-pointer-less stacks rarely show the caller, so they count as regex time
    (re.compile(r"^(sre_|_sre|pattern_|SRE_|_PyUnicode_(IsAlpha|IsNumeric|IsDecimalDigit|IsDigit|ToDigit|"
                r"ToDecimalDigit|IsWhitespace|IsLinebreak|IsLowercase|IsUppercase))"), "regex engine (CPython _sre)"),
    (re.compile(r"^(_?PyEval_|_PyFunction|_PyObject_Call|PyObject_Call|_Py_Dealloc|_PyFrame)"), "Python interpreter loop"),
    (re.compile(r"^(_?PyUnicode|unicode_|_copy_characters|ucs[124]lib)"), "Python str operations"),
    (re.compile(r"^(_?PyObject_(Malloc|Free|Realloc)|_int_malloc|_int_free|malloc|free|cfree|pymalloc|__libc_malloc)"), "memory allocation"),
    (re.compile(r"^(json|encoder_|scanner_|_json)"), "JSON encoding"),
    (re.compile(r"^(futex|__lll_lock|pthread_mutex|take_gil|drop_gil|PyThread_acquire)"), "locks and the GIL"),
    (re.compile(r"^(cuLaunch|cudaLaunch|libcuda)"), "CUDA launch path"),
)
GENERIC = {"Python interpreter loop", "other"}
GIL_INTERVAL_MS = 5.0
FUTEX_NAMES = ("futex", "futex_wait")
MIN_PROCESS_SAMPLES = 20  # fewer samples than this say nothing about where a process spends time


def _family(fn: str) -> str:
    for pattern, label in FAMILIES:
        if pattern.match(fn):
            return label
    return "other"


@feature("host_hotspots", doc="perf samples grouped by function family (one row per family and process "
         "name): value = % of that process's samples in the family (self time); attrs: family, samples, "
         "process_samples, top_functions, generic (interpreter/other, not a specific hotspot).")
def host_hotspots(ctx) -> pd.DataFrame:
    ev = ctx.events
    s = ev[(ev["source"] == "perf") & (ev["kind"] == "sample")]  # the text test only on these rows
    s = s[s["attrs"].str.contains('"stack"', regex=False)]
    if s.empty:
        return s.iloc[0:0]
    comm = s["attrs"].map(lambda a: json.loads(a).get("comm", "")).astype(str)
    frame = pd.DataFrame({"comm": comm.to_numpy(), "fn": text_values(s["name"]),
                          "ts": s["ts"].to_numpy(), "artifact": text_values(s["artifact"])})
    frame["family"] = frame["fn"].map(_family)
    rows = []
    for comm_name, g in frame.groupby("comm", sort=False):
        total = len(g)
        if total < MIN_PROCESS_SAMPLES:
            continue
        for family, fg in g.groupby("family", sort=False):
            top = fg["fn"].value_counts().head(4)
            rows.append({
                "ts": int(fg["ts"].min()), "kind": "sample", "name": family, "artifact": fg["artifact"].iloc[0],
                "value": 100.0 * len(fg) / total, "unit": "%",
                "attrs": json.dumps({"family": family, "comm": comm_name, "samples": int(len(fg)),
                                     "process_samples": int(total), "generic": family in GENERIC,
                                     "top_functions": [f"{k} ({v})" for k, v in top.items()],
                                     "text": f"{family}: {len(fg)} of {total} samples in {comm_name} "
                                             f"(top: {', '.join(top.index)})"}),
            })
    return pd.DataFrame(rows)


def _syscall_share(ev: pd.DataFrame) -> tuple[float, float] | None:
    """(futex ms, all syscall ms) from perf trace lines or perf trace -s summaries."""
    perf = ev[ev["source"] == "perf"]
    summary = perf[(perf["kind"] == "sample") & perf["attrs"].str.contains('"total_ms"', regex=False)]
    if len(summary):
        total = summary["value"].sum()
        futex = summary.loc[summary["name"] == "futex", "value"].sum()
        return float(futex), float(total)
    calls = perf[in_values(perf["kind"], ["span", "sync"]) & (perf["dur"] > 0)]
    if len(calls):
        futex = calls.loc[in_values(calls["name"], FUTEX_NAMES), "dur"].sum() / 1e6
        return float(futex), float(calls["dur"].sum() / 1e6)
    return None


@feature("lock_waits", doc="futex/lock waits over the whole capture (one row): value = futex share of "
         "syscall time in %; attrs: waits, threads, total_ms, typical_ms (median wait, or the mean from a "
         "perf trace -s summary), gil_like (typical wait within 10% of CPython's 5 ms switch interval), verdict.")
def lock_waits(ctx) -> pd.DataFrame:
    ev = ctx.events
    waits = ev[(ev["kind"] == "sync") & in_values(ev["name"], FUTEX_NAMES) & (ev["dur"] > 0)]
    # perf trace also lists FUTEX_WAKE calls: only waits block a thread
    waits = waits[~waits["attrs"].str.contains('"wait":false', regex=False)]
    share = _syscall_share(ev)
    summary = _futex_summary(ev)
    if waits.empty and share is None:
        return ev.iloc[0:0]
    if len(waits):
        count, threads = int(len(waits)), int(waits["tid"].nunique())
        typical = float(np.median(waits["dur"].to_numpy() / 1e6))
    else:
        count, threads, typical = summary
    futex_ms, total_ms = share if share else (float(waits["dur"].sum() / 1e6), float("nan"))
    gil_like = bool(typical == typical and abs(typical - GIL_INTERVAL_MS) <= 0.1 * GIL_INTERVAL_MS)
    first = (waits if len(waits) else ev[(ev["source"] == "perf") & (ev["name"] == "futex")]).iloc[[0]].copy()
    first["kind"], first["name"] = "sync", "lock_waits"
    first["value"] = 100.0 * futex_ms / total_ms if total_ms == total_ms and total_ms > 0 else float("nan")
    first["attrs"] = json.dumps({
        "waits": count, "threads": threads, "total_ms": round(futex_ms, 1),
        "syscall_ms": round(total_ms, 1) if total_ms == total_ms else None,
        "typical_ms": round(typical, 2) if typical == typical else None, "gil_like": gil_like,
        "verdict": _verdict(gil_like, from_summary=waits.empty),
        "text": f"{count} futex waits, {futex_ms:.0f} ms in total"
                + (f", typical wait {typical:.2f} ms" if typical == typical else ""),
    })
    return first


def _verdict(gil_like: bool, from_summary: bool) -> str:
    if from_summary:
        return ("a summary gives only the mean wait: trace individual futex waits (`perf trace -e futex` or "
                "bpftrace) to tell the GIL (waits at the 5 ms switch interval) from a program lock")
    if gil_like:
        return ("the waits cluster at CPython's 5 ms GIL switch interval (sys.getswitchinterval()): the threads "
                "are queueing for the GIL, not for the program's own lock")
    return "the waits do not cluster at the GIL switch interval: the threads contend for a lock of the program or a library"


def _futex_summary(ev: pd.DataFrame) -> tuple[int, int, float]:
    """(calls, threads, call-weighted mean ms) of futex from perf trace -s summaries."""
    rows = ev[(ev["source"] == "perf") & (ev["name"] == "futex")]
    rows = rows[rows["attrs"].str.contains('"calls"', regex=False)]
    if rows.empty:
        return 0, 0, float("nan")
    calls = rows["attrs"].map(lambda a: json.loads(a).get("calls", 0)).astype(float)
    total = float(calls.sum())
    return int(total), int(rows["tid"].nunique()), float(rows["value"].sum() / total) if total else float("nan")
