"""Decode-loop features: steps, cold start, steady-state latency jitter, allocator churn.

Steps come from per-token latency records (token_latency.jsonl) when the trace has them,
else from OTLP step spans (prefill / decode_step ...), else from `decode_step_N` /
`ProfilerStep#N` annotations of a profiler trace.
A step is a cold-start step while the leading steps stay far above the steady median
(lazy CUDA module loading, cuBLAS/cuDNN init, allocator warm-up): those are reported once
and excluded from steady-state SLIs, so they are never mistaken for jitter.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import category_mask, in_values
from rules.engine.features import feature

COLD_FACTOR = 3.0        # a leading step this many times the steady median is cold
MAX_COLD_STEPS = 5
SPIKE_FACTOR = 1.5       # a steady step this many times the median is a spike
OTLP_STEP_SPANS = ("prefill", "decode_step", "decode", "generate_token", "token")
ALLOC_CALLS = ("cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync", "cuMemAlloc_v2",
               "cuMemFree_v2", "hipMalloc", "hipFree")


def _steps_from_events(ev: pd.DataFrame) -> pd.DataFrame:
    tok = ev[(ev["source"] == "token_latency") & (ev["kind"] == "span")]
    if len(tok):
        steps = tok[["ts", "dur", "host", "pid", "artifact", "loc", "attrs"]].copy()
        steps["origin"] = "token_latency"
        return steps
    spans = ev[(ev["source"] == "otlp") & (ev["kind"] == "span") & in_values(ev["name"], OTLP_STEP_SPANS)]
    if len(spans):
        # the same spans exported as JSON and as protobuf are one step each
        spans = spans.drop_duplicates("span_id") if spans["span_id"].astype(bool).all() else spans
        steps = spans[["ts", "dur", "host", "pid", "artifact", "loc", "attrs"]].copy()
        steps["origin"] = "otlp"
        return steps
    ann = ev[(ev["kind"] == "annotation")]
    mask = category_mask(ann["name"], lambda names: names.str.match(r"^(decode_step_\d+|ProfilerStep#\d+)$"))
    ann = ann[mask & (ann["dur"] > 0).to_numpy()]
    if ann.empty:
        return ann.assign(origin=pd.Series(dtype=str))
    # a step annotated on the CPU and on the GPU lane: keep the CPU (wider) one once
    ann = ann.sort_values("dur", ascending=False).drop_duplicates("name").sort_values("ts")
    steps = ann[["ts", "dur", "host", "pid", "artifact", "loc", "attrs", "name"]].copy()
    steps["origin"] = "annotation"
    return steps


@feature("decode_steps", doc="One row per decode step / profiler step: ts, dur, value = latency in ms, "
         "step = index, cold = part of the cold start, spike = above 1.5x the steady median, token = the step "
         "emits a token (token-latency records, OTLP decode spans, decode_step_N annotations; not ProfilerStep#N).")
def decode_steps(ctx) -> pd.DataFrame:
    steps = _steps_from_events(ctx.events).sort_values("ts", ignore_index=True)
    if steps.empty:
        return steps
    # token SLIs need steps that emit tokens: a profiler step may be a training or diffusion step
    steps["token"] = _emits_tokens(steps)
    steps["kind"] = "span"
    steps["name"] = "decode_step"
    steps["value"] = steps["dur"] / 1e6
    steps["unit"] = "ms"
    steps["step"] = np.arange(len(steps))
    lat = steps["value"].to_numpy()
    tail_median = float(np.median(lat[min(MAX_COLD_STEPS, len(lat) // 2):])) if len(lat) > 2 else float(np.median(lat))
    cold = np.zeros(len(lat), dtype=bool)
    for i in range(min(MAX_COLD_STEPS, len(lat) - 1)):
        if lat[i] >= COLD_FACTOR * tail_median:
            cold[i] = True
        else:
            break
    steps["cold"] = cold
    steady = lat[~cold]
    median = float(np.median(steady)) if len(steady) else tail_median
    steps["spike"] = ~cold & (lat >= SPIKE_FACTOR * median)
    steps["steady_median_ms"] = median
    return steps


def _emits_tokens(steps: pd.DataFrame) -> pd.Series:
    """Token-latency records and OTLP decode spans emit tokens; of the annotations, only
    decode_step_N does (ProfilerStep#N may be a training or diffusion step)."""
    if "name" not in steps.columns:
        return pd.Series(True, index=steps.index)
    decode = category_mask(steps["name"], lambda names: names.str.startswith("decode_step_"))
    return steps["origin"].ne("annotation") | pd.Series(decode, index=steps.index)


@feature("cold_start", doc="The leading cold-start steps (one summary row): value = cold steps' total ms, "
         "attrs: steps, first_ms, steady_median_ms.")
def cold_start(ctx) -> pd.DataFrame:
    steps = ctx.feature("decode_steps")
    if steps.empty or not steps["cold"].any():
        return steps.iloc[0:0]
    cold = steps[steps["cold"]]
    row = cold.iloc[[0]].copy()
    row["dur"] = int(cold["ts"].max() + cold["dur"].iloc[-1] - cold["ts"].min())
    row["value"] = float(cold["value"].sum())
    row["name"] = "cold_start"
    row["attrs"] = json.dumps({
        "steps": int(len(cold)), "last_cold_step": int(cold["step"].max()),
        "first_ms": round(float(cold["value"].iloc[0]), 1),
        "steady_median_ms": round(float(steps["steady_median_ms"].iloc[0]), 2),
        "ratio": round(float(cold["value"].iloc[0]) / max(float(steps["steady_median_ms"].iloc[0]), 1e-9), 1),
        "text": "cold steps " + ", ".join(f"{int(i)}: {v:.1f} ms" for i, v in zip(cold["step"], cold["value"]))
                + f"; steady median {float(steps['steady_median_ms'].iloc[0]):.2f} ms",
    })
    return row


@feature("steady_state", doc="The steady-state window after the cold start (one row): ts, dur.")
def steady_state(ctx) -> pd.DataFrame:
    steps = ctx.feature("decode_steps")
    if steps.empty:
        return steps
    steady = steps[~steps["cold"]]
    if steady.empty:
        return steady
    row = steady.iloc[[0]].copy()
    row["dur"] = int(steady["ts"].iloc[-1] + steady["dur"].iloc[-1] - steady["ts"].iloc[0])
    row["name"] = "steady_state"
    row["value"] = float(len(steady))
    return row


@feature("latency_jitter", doc="Steady-state step latency (one summary row): value = p99 / median; "
         "attrs: p50_ms, p99_ms, tail_ms (p99 - median), max_ms, steps, spikes.")
def latency_jitter(ctx) -> pd.DataFrame:
    steps = ctx.feature("decode_steps")
    steady = steps[~steps["cold"]] if not steps.empty else steps
    if len(steady) < 8:
        return steady.iloc[0:0]
    lat = steady["value"].to_numpy()
    p50, p99 = float(np.median(lat)), float(np.quantile(lat, 0.99))
    row = steady.iloc[[int(np.argmax(lat))]].copy()  # evidence points at the slowest step
    spikes = steady[steady["spike"]]
    row["dur"] = int(steady["ts"].iloc[-1] + steady["dur"].iloc[-1] - steady["ts"].iloc[0])
    row["name"] = "latency_jitter"
    row["value"] = p99 / p50 if p50 > 0 else float("nan")
    row["attrs"] = json.dumps({"p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "tail_ms": round(p99 - p50, 3),
                               "max_ms": round(float(lat.max()), 3), "steps": int(len(lat)),
                               "spikes": int(steady["spike"].sum()), "ratio": round(p99 / p50, 2),
                               "text": f"slowest step {int(steady['step'].iloc[int(np.argmax(lat))])}: "
                                       f"{float(lat.max()):.2f} ms; spikes at steps "
                                       + ", ".join(str(int(i)) for i in spikes["step"].head(20))})
    return row


@feature("alloc_churn", doc="cudaMalloc/cudaFree-type runtime calls inside the steady state (one summary "
         "row): value = calls; attrs: malloc, free, steps, steps_with_calls, spikes, spikes_with_calls.")
def alloc_churn(ctx) -> pd.DataFrame:
    ev = ctx.events
    steps = ctx.feature("decode_steps")
    steady = steps[~steps["cold"]] if not steps.empty else steps
    if steady.empty:
        # no steps, no steady state: allocations while a program fills memory are not churn
        return ev.iloc[0:0]
    lo = int(steady["ts"].iloc[0])
    hi = int(steady["ts"].iloc[-1] + steady["dur"].iloc[-1])
    calls = ev[(ev["kind"] == "runtime") & in_values(ev["name"], ALLOC_CALLS) & (ev["ts"] >= lo) & (ev["ts"] <= hi)]
    if calls.empty:
        return calls.iloc[0:0]
    frees = int(category_mask(calls["name"], lambda names: names.str.contains("Free")).sum())
    info: dict[str, int | float | str] = {"malloc": int(len(calls) - frees), "free": frees}
    starts = steady["ts"].to_numpy()
    ends = starts + steady["dur"].to_numpy()
    idx = np.searchsorted(starts, calls["ts"].to_numpy(), side="right") - 1
    valid = (idx >= 0) & (calls["ts"].to_numpy() <= ends[np.clip(idx, 0, None)])
    with_calls = np.zeros(len(steady), dtype=bool)
    with_calls[idx[valid]] = True
    spikes = steady["spike"].to_numpy()
    info.update(steps=int(len(steady)), steps_with_calls=int(with_calls.sum()),
                spikes=int(spikes.sum()), spikes_with_calls=int((spikes & with_calls).sum()))
    jitter = ctx.feature("latency_jitter")
    if not jitter.empty:
        info["jitter_ratio"] = round(float(jitter["value"].iloc[0]), 2)
    info["text"] = (f"{info['malloc']} allocation and {info['free']} free calls inside steady-state steps; "
                    f"first {calls['name'].iloc[0]} here, last at {calls['loc'].iloc[-1]}")
    row = calls.iloc[[0]].copy()
    row["dur"] = int(calls["ts"].iloc[-1] - calls["ts"].iloc[0])
    row["name"] = "alloc_churn"
    row["value"] = float(len(calls))
    row["attrs"] = json.dumps(info)
    return row
