"""Small time series the trace page plots (`report.trace.series`): per-step latency with
cold-start and spike flags, and GPU telemetry (utilisation, memory used, power) per device."""
from __future__ import annotations

import pandas as pd

from ingest.engine import interruptions
from ingest.engine.trace_frame import in_values

MAX_SERIES_POINTS = 5000
TELEMETRY = {"gpu.util": ("gpu_util_pct", 1.0), "mem.used": ("mem_used_gib", 1 / 2**30), "power": ("power_w", 1.0)}


def plot_series(ctx) -> dict:
    """{"step_latency_ms": [...], "gpu_telemetry": {...}}, each present when the trace has it."""
    out: dict[str, list | dict] = {}
    try:
        steps = ctx.feature("decode_steps")
    except Exception as e:  # a plot is never worth failing the report
        interruptions.reraise(e)
        steps = None
    if steps is not None and not steps.empty:
        steps = steps.iloc[:MAX_SERIES_POINTS]
        out["step_latency_ms"] = [
            {"ts": int(t), "step": int(i), "ms": round(float(v), 3), "cold": bool(c), "spike": bool(sp)}
            for t, i, v, c, sp in zip(steps["ts"], steps["step"], steps["value"], steps["cold"], steps["spike"])]
    telemetry = gpu_telemetry(ctx.events)
    if telemetry:
        out["gpu_telemetry"] = telemetry
    return out


def gpu_telemetry(events: pd.DataFrame) -> dict:
    """{device: {metric: [[ts, value], ...]}} from one source (NVML first, then nvidia-smi,
    DCGM), each metric evenly thinned to at most MAX_SERIES_POINTS points."""
    samples = events[(events["kind"] == "sample") & in_values(events["name"], list(TELEMETRY))]
    for source in ("nvml", "nvidia_smi", "dcgm"):
        part = samples[samples["source"] == source]
        if not part.empty:
            break
    else:
        return {}
    out: dict = {}
    for (device, name), g in part.sort_values("ts").groupby(["device", "name"], observed=True):
        key, scale = TELEMETRY[str(name)]
        step = max(1, len(g) // MAX_SERIES_POINTS)
        g = g.iloc[::step]
        out.setdefault(str(int(device)), {})[key] = [[int(t), round(float(v) * scale, 3)]
                                                     for t, v in zip(g["ts"], g["value"])]
    return out
