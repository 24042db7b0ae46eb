"""Geometry of the GPU telemetry chart drawn as inline SVG (pure: no Django, no I/O).

One small-multiple panel per metric (utilisation, memory used, power), stacked on one shared
time axis in seconds from the trace start, one polyline per device. The findings' time spans
are translucent bands behind the lines, so a person sees e.g. memory climbing before an OOM.
Each panel's y scale starts at 0: these are amounts, and a zoomed scale would turn noise
into cliffs.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import groupby

from diagnosis.engine.charts.latency import Tick, nice_step
from rules.engine.results import Finding
from rules.engine.severity import RANK

METRICS = (("gpu_util_pct", "GPU utilisation", "%"), ("mem_used_gib", "Memory used", "GiB"),
           ("power_w", "Power", "W"))
PAD_L = 56      # y tick labels
PAD_R = 24
PAD_T = 8
PAD_B = 38      # x tick labels and the axis name
TITLE_H = 20    # each panel's title above its plot
PANEL_H = 96
GAP = 14
MIN_BAND_W = 3.0
NARROW_BAND_W = 6.0  # drawn more opaque, else an instant finding (an OOM) is a faint hairline
PALETTE = 8     # device colours (CSS classes dev-0 .. dev-7), reused past that


@dataclass(frozen=True)
class DevicePolyline:
    device: str
    colour: int
    points: str  # SVG polyline "x,y x,y ..."
    peak: float


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    unit: str
    y0: float   # top of the plot
    y1: float   # bottom of the plot (value 0)
    lines: list[DevicePolyline]
    y_ticks: list[Tick]

    @property
    def h(self) -> float:
        return self.y1 - self.y0

    @property
    def peak_label(self) -> str:
        return format_value(max(line.peak for line in self.lines))


@dataclass(frozen=True)
class Band:
    id: str
    title: str
    severity: str
    x: float
    w: float

    @property
    def narrow(self) -> bool:
        return self.w <= NARROW_BAND_W


@dataclass
class TelemetryChart:
    width: int
    height: int
    x0: float
    x1: float
    panels: list[Panel] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    devices: list[tuple[str, int]] = field(default_factory=list)  # (device, colour) for the legend

    @property
    def empty(self) -> bool:
        return not self.panels

    @property
    def band_severities(self) -> list[str]:
        """For the legend, the most severe first."""
        return sorted({b.severity for b in self.bands}, key=lambda s: -RANK.get(s, -1))

    @property
    def axis_y(self) -> float:
        return self.panels[-1].y1 if self.panels else self.height - PAD_B


def format_value(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def format_seconds(s: float) -> str:
    return f"{s:g}" if s == int(s) else f"{s:.3g}"


def chart(telemetry: dict, findings: Iterable[Finding] = (), start_ts: int | None = None, end_ts: int | None = None,
          width: int = 960, target_ticks: int = 6) -> TelemetryChart:
    """telemetry: the report's `trace.series.gpu_telemetry` ({device: {metric: [[ts_ns, v], ...]}});
    findings: the report's findings (id, title, severity, start_ts, end_ts); start_ts / end_ts:
    the trace's span, widened to the samples when they lie outside it."""
    devices = sorted(telemetry, key=_device_order)
    series = {key: {dev: pts for dev in devices if (pts := samples(telemetry[dev].get(key)))}
              for key, _, _ in METRICS}
    shown = [m for m in METRICS if series[m[0]]]
    height = PAD_T + len(shown) * (TITLE_H + PANEL_H) + max(len(shown) - 1, 0) * GAP + PAD_B
    x0, x1 = PAD_L, width - PAD_R
    out = TelemetryChart(width=width, height=height, x0=x0, x1=x1)
    if not shown:
        return out
    times = [t for key, _, _ in shown for pts in series[key].values() for t in (pts[0][0], pts[-1][0])]
    t0 = min([start_ts] + times) if start_ts else min(times)
    t1 = max([end_ts] + times) if end_ts else max(times)
    span = max(t1 - t0, 10**9)  # at least a second: a single sample still gets an axis

    def x(t: int) -> float:
        return round(x0 + (t - t0) / span * (x1 - x0), 2)

    colours = {dev: i % PALETTE for i, dev in enumerate(d for d in devices if any(d in by for by in series.values()))}
    out.devices = list(colours.items())
    for i, (key, title, unit) in enumerate(shown):
        y0 = PAD_T + i * (TITLE_H + PANEL_H + GAP) + TITLE_H
        out.panels.append(panel(key, title, unit, series[key], y0, x, colours))
    out.bands = bands(findings, t0, t1, x)
    x_step = nice_step(span / 1e9 / target_ticks)
    out.x_ticks = [Tick(x(t0 + round(k * x_step * 1e9)), format_seconds(round(k * x_step, 9)))
                   for k in range(int(span / 1e9 / x_step + 1e-9) + 1)]
    return out


def samples(rows) -> list[tuple[int, float]]:
    return [(int(t), float(v)) for t, v in rows or [] if v is not None and v == v]  # v == v: not NaN


def bands(findings, t0: int, t1: int, x) -> list[Band]:
    """The findings' spans clipped to the axis; a finding wholly outside it has no band."""
    out = []
    for f in findings:
        start = f.start_ts
        if not start:
            continue
        end = max(f.end_ts or start, start)
        if end < t0 or start > t1:
            continue
        left, right = x(max(start, t0)), x(min(end, t1))
        w = max(right - left, MIN_BAND_W)
        left = min(left, x(t1) - w)  # a minimum-width band at the right edge stays inside the axis
        out.append(Band(f.id, f.title, f.severity, round(left, 2), w))
    return out


def panel(key: str, title: str, unit: str, by_device: dict, y0: float, x, colours: dict) -> Panel:
    y1 = y0 + PANEL_H
    top, y_step = y_scale(max(v for pts in by_device.values() for _, v in pts), unit)

    def y(v: float) -> float:
        return round(y1 - min(max(v, 0.0), top) / top * (y1 - y0), 2)

    lines = [DevicePolyline(dev, colours[dev], " ".join(f"{px},{y(v)}" for px, v in thin([(x(t), v) for t, v in pts])),
                  max(v for _, v in pts))
             for dev, pts in by_device.items()]
    ticks = [Tick(y(k * y_step), format_value(k * y_step)) for k in range(round(top / y_step) + 1)]
    return Panel(key, title, unit, y0, y1, lines, ticks)


def y_scale(peak: float, unit: str) -> tuple[float, float]:
    """(top, tick step): 0-100 for a percentage, else 0 up to the peak rounded up to a 1-2-5 step."""
    if unit == "%":
        return 100.0, 25.0
    step = nice_step(peak / 4) if peak > 0 else 1.0
    return max(math.ceil(peak / step), 1) * step, step


def thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """At most the lowest and the highest sample of each pixel column, in time order: the line
    looks the same (spikes kept) with a bounded number of points."""
    out: list[tuple[float, float]] = []
    for _, group in groupby(points, key=lambda p: int(p[0])):
        column = list(group)
        lo, hi = min(column, key=lambda p: p[1]), max(column, key=lambda p: p[1])
        out.extend([lo] if lo is hi else sorted((lo, hi)))
    return out


def _device_order(device: str) -> tuple[int, str]:
    return (int(device), "") if device.isdigit() else (1 << 30, device)
