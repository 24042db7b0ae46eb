"""What the slow steps of a profiler window do that the others do not.

A latency spike is explained when one piece of host work (a CPU op or a `record_function`
annotation) accounts for most of the time a slow step takes beyond the median step: its time
in the slow step less its typical (median) time per step. Nested work counts once: of the
names whose excess is within 80 % of the largest, the narrowest (least total time) is named,
so a step-wide wrapper such as `## forward ##` never hides the op inside it.

Steps are the `ProfilerStep#N` annotations a `torch.profiler` window writes (the closed-loop
hook's captures have them; so do most training loops' traces).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import category_mask, in_values, text_values
from rules.engine.features import feature

SLOW_FACTOR = 1.5        # a step this many times the median step is slow
MIN_EXCESS_NS = 1_000_000  # ... and at least 1 ms over it: sub-millisecond wobble is timer noise
MIN_STEPS = 4            # fewer steps give no median worth comparing with
NARROWEST_WITHIN = 0.8   # names within this share of the largest excess are one nest: name the narrowest
HOST_KINDS = ("cpu_op", "annotation")
MIN_SHARE_OF_ALL = 0.25  # named only when it accounts for this share of all slow steps' extra time


def _is_step(names: pd.Series) -> np.ndarray:
    return category_mask(names, lambda values: values.str.match(r"^ProfilerStep#\d+$"))


def profiler_steps(ev: pd.DataFrame) -> pd.DataFrame:
    """The `ProfilerStep#N` spans of the host thread, in time order (the step-time SLI reads them
    too). A step is also projected onto the GPU lane, which carries no host thread (tid -1): those
    copies are left out. Not by name: two profiler windows number their steps from 0 alike."""
    ann = ev[(ev["kind"] == "annotation").to_numpy() & (ev["dur"] > 0).to_numpy()]
    steps = ann[_is_step(ann["name"])]
    host = (steps["tid"] != -1).to_numpy()
    if host.any() and not host.all():
        steps = steps[host]
    return steps.sort_values("ts")


def _work_per_step(work: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Total time per (step, name) of the host work that starts inside each step."""
    starts, ends = steps["ts"].to_numpy(), (steps["ts"] + steps["dur"]).to_numpy()
    at = np.searchsorted(starts, work["ts"].to_numpy(), side="right") - 1
    inside = (at >= 0) & (work["ts"].to_numpy() < ends[np.clip(at, 0, None)])
    frame = pd.DataFrame({"step": at[inside], "name": text_values(work["name"])[inside],
                          "dur": work["dur"].to_numpy()[inside]})
    return frame.groupby(["step", "name"], sort=False)["dur"].sum().unstack(fill_value=0)


@feature("slow_step_work", doc="Profiler windows (ProfilerStep#N): one row per piece of host work (CPU op or "
         "annotation) that explains the slow steps (over 1.5x the median step and 1 ms): value = % of the slow "
         "steps' excess time over the median it accounts for; attrs: op, slow_steps, steps, slow_ms, median_ms, "
         "op_ms (mean in the slow steps), typical_ms (median per step), first_step, text.")
def slow_step_work(ctx) -> pd.DataFrame:
    ev = ctx.events
    steps = profiler_steps(ev)
    if len(steps) < MIN_STEPS:
        return ev.iloc[0:0]
    dur = steps["dur"].to_numpy()
    median = float(np.median(dur))
    slow = np.flatnonzero((dur > SLOW_FACTOR * median) & (dur - median >= MIN_EXCESS_NS))
    if not len(slow):
        return ev.iloc[0:0]
    work = ev[in_values(ev["kind"], HOST_KINDS) & (ev["dur"] > 0)]
    # the steps' own thread: GPU-lane copies of annotations and other threads' work are not the step's time
    work = work[~_is_step(work["name"]) & work["tid"].isin(steps["tid"].unique()).to_numpy()]
    if work.empty:
        return ev.iloc[0:0]
    per_step = _work_per_step(work, steps).reindex(range(len(steps)), fill_value=0)
    normal = per_step.drop(index=slow)
    typical = normal.median() if len(normal) else per_step.median() * 0
    named: dict[str, list[int]] = {}
    for i in slow:
        excess = per_step.loc[i] - typical
        top = excess.max()
        if top <= 0 or top < 0.5 * (dur[i] - median):
            continue  # no one piece of host work explains this step
        nest = excess[excess >= NARROWEST_WITHIN * top].index
        narrowest = per_step.loc[:, nest].sum().idxmin()
        named.setdefault(narrowest, []).append(int(i))
    all_excess = float((dur[slow] - median).sum())
    rows = []
    for op, at in named.items():
        if float((per_step.loc[at, op] - typical[op]).sum()) < MIN_SHARE_OF_ALL * all_excess:
            continue  # one odd step (the window's first, a warm-up) beside the work that recurs
        excess_total = float((dur[at] - median).sum())
        op_excess = float((per_step.loc[at, op] - typical[op]).sum())
        first = steps.iloc[at[0]]
        share = 100.0 * min(op_excess / excess_total, 1.0) if excess_total > 0 else 0.0
        attrs = {"op": op, "slow_steps": len(at), "steps": int(len(steps)), "all_slow": int(len(slow)),
                 "slow_ms": round(float(dur[at].mean()) / 1e6, 2), "median_ms": round(median / 1e6, 2),
                 "op_ms": round(float(per_step.loc[at, op].mean()) / 1e6, 2),
                 "typical_ms": round(float(typical[op]) / 1e6, 2), "first_step": str(first["name"])}
        attrs["text"] = (f"{op}: {attrs['op_ms']} ms in {len(at)} slow step(s) of {attrs['slow_ms']} ms "
                         f"(median step {attrs['median_ms']} ms, typically {attrs['typical_ms']} ms in {op})")
        rows.append({"ts": int(first["ts"]), "dur": int(first["dur"]), "kind": "annotation", "name": op,
                     "host": first["host"], "pid": first["pid"], "artifact": first["artifact"], "loc": first["loc"],
                     "value": share, "unit": "%", "attrs": json.dumps(attrs)})
    return pd.DataFrame(rows)
