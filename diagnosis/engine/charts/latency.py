"""Geometry of the per-step latency chart drawn as inline SVG (pure: no Django, no I/O).

x is the decode step, y the step's latency in ms from 0. The y scale fits the steady state
(spikes included, cold start not): a cold first step can be 20x the steady median and would
flatten everything else to the floor, so cold points above the scale are drawn pinned to
the top edge with their value. The dashed line is the steady-state median, the one the
latency SLIs and the spike flag (1.5x median) are measured against.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

PAD_L = 56      # y tick labels
PAD_R = 104     # the median's label
PAD_T = 26
PAD_B = 38      # x tick labels and the axis name


@dataclass(frozen=True)
class Point:
    step: int
    ms: float
    x: float
    y: float
    kind: str            # steady | spike | cold
    clipped: bool = False  # above the y scale, drawn on the top edge

    @property
    def label(self) -> str:
        return f"{format_ms(self.ms)} ms"


@dataclass(frozen=True)
class Tick:
    pos: float  # x for an x tick, y for a y tick
    label: str


@dataclass
class LatencyChart:
    width: int
    height: int
    x0: float
    x1: float
    y0: float   # top of the plot
    y1: float   # bottom of the plot (0 ms)
    points: list[Point] = field(default_factory=list)
    path: str = ""
    median_ms: float | None = None
    median_y: float | None = None
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.points

    @property
    def median_label(self) -> str:
        return f"{format_ms(self.median_ms)} ms" if self.median_ms is not None else ""

    @property
    def off_scale(self) -> list[Point]:
        return [p for p in self.points if p.clipped]

    @property
    def spikes(self) -> int:
        return sum(p.kind == "spike" for p in self.points)

    @property
    def cold(self) -> int:
        return sum(p.kind == "cold" for p in self.points)


def nice_step(raw: float) -> float:
    """The smallest 1-2-5 x 10^k at or above `raw`."""
    if raw <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw * (1 - 1e-9))


def format_ms(ms: float) -> str:
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def kind_of(point: dict) -> str:
    return "cold" if point.get("cold") else "spike" if point.get("spike") else "steady"


def chart(series: list[dict], width: int = 960, height: int = 280, target_ticks: int = 5) -> LatencyChart:
    """series: the report's `trace.series.step_latency_ms` ({ts, step, ms, cold, spike})."""
    x0, x1, y0, y1 = PAD_L, width - PAD_R, PAD_T, height - PAD_B
    out = LatencyChart(width=width, height=height, x0=x0, x1=x1, y0=y0, y1=y1)
    rows = [p for p in series if p.get("ms") is not None]
    if not rows:
        return out
    warm = [p["ms"] for p in rows if not p.get("cold")]
    scaled = warm or [p["ms"] for p in rows]
    y_step = nice_step(max(scaled) / target_ticks)
    top = max(math.ceil(max(scaled) / y_step), 1) * y_step
    first, last = rows[0]["step"], rows[-1]["step"]
    span = max(last - first, 1)

    def x(step: int) -> float:
        return round(x0 + (step - first) / span * (x1 - x0), 2) if last > first else (x0 + x1) / 2

    def y(ms: float) -> float:
        return round(y1 - min(ms, top) / top * (y1 - y0), 2)

    out.points = [Point(p["step"], p["ms"], x(p["step"]), y(p["ms"]), kind_of(p), p["ms"] > top) for p in rows]
    out.path = "M" + " L".join(f"{p.x},{p.y}" for p in out.points)
    if warm:
        out.median_ms = round(statistics.median(warm), 3)
        out.median_y = y(out.median_ms)
    out.y_ticks = [Tick(y(i * y_step), format_ms(i * y_step)) for i in range(round(top / y_step) + 1)]
    x_step = max(int(nice_step(span / target_ticks)), 1)
    out.x_ticks = [Tick(x(s), str(s)) for s in range(first - first % x_step, last + 1, x_step) if s >= first]
    return out
