"""Figures of one trace for `tracedoc diff`: GPU busy share, time to first token and the kernels
that took the most GPU time. They need the event table; the report stores the first two
(`headline_slis`, the report's `slis`), so a stored report gives them too (diagnosis.engine.diff.stored);
the kernel table of a stored report comes from its breakdowns. A figure a trace cannot give is None.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diagnosis.engine.slis import time_to_first_token
from ingest.engine.trace_frame import parse_attrs
from rules.engine.features import FeatureError, TraceContext

TOP_KERNELS = 10


@dataclass(frozen=True)
class KernelTime:
    name: str
    total_ms: float
    calls: int


@dataclass(frozen=True)
class TraceFigures:
    gpu_busy_pct: float | None           # steady-state GPU busy share (feature `gpu_activity`)
    ttft_ms: float | None                # first token-emitting step (SLI `time_to_first_token`)
    top_kernels: tuple[KernelTime, ...]  # by total GPU time, largest first; empty without kernels


def measure(events: pd.DataFrame) -> TraceFigures:
    ctx = TraceContext(events)
    return TraceFigures(gpu_busy_pct=_gpu_busy_pct(ctx), ttft_ms=_ttft_ms(ctx), top_kernels=_top_kernels(ctx.events))


def headline_slis(ctx: TraceContext) -> dict[str, float | None]:
    """The figures the report stores under `slis`."""
    return {"ttft_ms": _ttft_ms(ctx), "gpu_busy_pct": _gpu_busy_pct(ctx)}


def _gpu_busy_pct(ctx: TraceContext) -> float | None:
    try:
        activity = ctx.feature("gpu_activity")
    except FeatureError:  # a figure is never worth failing the diff
        return None
    if activity.empty:
        return None
    return parse_attrs(activity["attrs"].iloc[0]).get("busy_pct")


def _ttft_ms(ctx: TraceContext) -> float | None:
    try:
        first = time_to_first_token(ctx)
    except FeatureError:
        return None
    return None if first is None or first.empty else round(float(first["value"].iloc[0]), 3)


def _top_kernels(events: pd.DataFrame, n: int = TOP_KERNELS) -> tuple[KernelTime, ...]:
    kernels = events[(events["kind"] == "kernel").to_numpy()]
    if kernels.empty:
        return ()
    by_name = pd.DataFrame({"name": kernels["name"].astype(str).to_numpy(),
                            "dur": kernels["dur"].to_numpy(np.int64)}) \
        .groupby("name").agg(total=("dur", "sum"), calls=("dur", "size"))
    top = by_name.sort_values(["total", "calls"], ascending=False).head(n)
    return tuple(KernelTime(name=str(name), total_ms=round(float(row.total) / 1e6, 3), calls=int(row.calls))
                 for name, row in top.iterrows())
