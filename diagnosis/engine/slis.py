"""SLIs: named functions from the trace context to observations (ts, value).

Latencies are in milliseconds; ratio SLIs give 1 (good) / 0 (bad) per observation;
count SLIs give 1 per counted event.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import in_values, parse_attrs
from rules.engine.features.slow_steps import profiler_steps

CAPTURE_ERRORS = ("cudaErrorStreamCaptureUnsupported", "cudaErrorStreamCaptureInvalidated",
                  "cudaErrorStreamCaptureMerge", "cudaErrorStreamCaptureUnmatched",
                  "cudaErrorStreamCaptureUnjoined", "cudaErrorStreamCaptureIsolation",
                  "cudaErrorStreamCaptureImplicit", "cudaErrorStreamCaptureWrongThread",
                  "CaptureAborted")


def _obs(ts, value) -> pd.DataFrame:
    """Observations; a scalar value applies to every timestamp."""
    ts = np.asarray(ts, dtype=np.int64)
    return pd.DataFrame({"ts": ts, "value": np.broadcast_to(np.asarray(value, dtype=np.float64), ts.shape)})


def _token_steps(ctx) -> pd.DataFrame:
    """Decode steps that emit tokens: per-token SLOs mean nothing on training or diffusion steps."""
    steps = ctx.feature("decode_steps")
    return steps[steps["token"]] if not steps.empty else steps


def token_latency(ctx):
    steps = _token_steps(ctx)
    steps = steps[~steps["cold"]] if not steps.empty else steps
    return _obs(steps["ts"], steps["value"]) if not steps.empty else None


MIN_TAIL_MS = 1.0  # below this p99 - median is timer noise on sub-millisecond steps, not a tail users see


def token_latency_tail_ratio(ctx):
    j = ctx.feature("latency_jitter")
    if j.empty or _token_steps(ctx).empty or parse_attrs(j["attrs"].iloc[0]).get("tail_ms", MIN_TAIL_MS) < MIN_TAIL_MS:
        return None
    return _obs(j["ts"], j["value"])


def time_to_first_token(ctx):
    steps = _token_steps(ctx)
    return _obs(steps["ts"].iloc[:1], steps["value"].iloc[:1]) if not steps.empty else None


def step_time(ctx):
    """Profiler steps after the first (it carries warm-up); None unless at least one is left:
    a trace of one step has no steady-state step time to hold to an objective."""
    ann = profiler_steps(ctx.events).iloc[1:]
    if ann.empty:
        return None
    return _obs(ann["ts"], ann["dur"] / 1e6)


def collective_duration(ctx):
    ev = ctx.events
    coll = ev[(ev["kind"] == "collective") & (ev["dur"] > 0)]
    timeouts = ev[(ev["kind"] == "error") & (ev["name"] == "NCCLWatchdogTimeout")]
    elapsed = timeouts["attrs"].map(lambda a: parse_attrs(a).get("elapsed_ms")).astype(float)
    frames = []
    if not coll.empty:
        frames.append(_obs(coll["ts"], coll["dur"] / 1e6))
    if not timeouts.empty:
        frames.append(_obs(timeouts["ts"], elapsed.fillna(float("inf"))))
    return pd.concat(frames, ignore_index=True) if frames else None


def graph_replay_success(ctx):
    ev = ctx.events
    launches = ev[(ev["kind"] == "runtime") & (ev["name"] == "cudaGraphLaunch")]
    failures = ev[(ev["kind"] == "error") & in_values(ev["name"], CAPTURE_ERRORS)]
    aborted = ctx.feature("capture_aborts")
    if launches.empty and failures.empty and aborted.empty:
        return None
    return pd.concat([_obs(launches["ts"], 1.0), _obs(failures["ts"], 0.0), _obs(aborted["ts"], 0.0)],
                     ignore_index=True)


def oom_count(ctx):
    """Allocation failures, each counted once however many artifacts saw it."""
    oom = ctx.feature("oom_analysis")
    return _obs(oom["ts"], 1.0) if not oom.empty else None


def error_count(ctx):
    ev = ctx.events
    err = ev[(ev["kind"] == "error") & in_values(ev["severity"], ["error", "critical"])]
    return _obs(err["ts"], 1.0) if not err.empty else None


SLI_FUNCTIONS = {f.__name__: f for f in (token_latency, token_latency_tail_ratio, time_to_first_token,
                                         step_time, collective_duration, graph_replay_success,
                                         oom_count, error_count)}
SLI_UNITS = {"token_latency": "ms", "time_to_first_token": "ms", "step_time": "ms",
             "collective_duration": "ms", "token_latency_tail_ratio": "x"}
