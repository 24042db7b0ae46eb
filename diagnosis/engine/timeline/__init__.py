"""Geometry of the trace timeline drawn as inline SVG (pure: no Django, no I/O).

One lane per artifact shows the time its events cover; findings are marks on a row above
the lanes, and each piece of evidence is a dot on its artifact's lane, so a person sees
which file said what, when. The template only draws what `layout()` computed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Sequence

from diagnosis.engine.charts.latency import nice_step
from rules.engine.results import Finding

LABEL_W = 230          # left column for lane names
PAD_R = 16
AXIS_H = 26            # tick labels at the bottom
ROW_H = 24
FINDINGS_ROW_H = 30
MIN_MARK_W = 3.0
WALL_CLOCK_FROM_NS = 946_684_800 * 10**9  # 2000-01-01: earlier starts count from a boot or a capture start


@dataclass(frozen=True)
class Lane:
    label: str
    y: float
    x: float | None = None  # None: the artifact has no timed events
    w: float | None = None


@dataclass(frozen=True)
class Mark:
    id: str
    title: str
    severity: str
    x: float
    w: float
    y: float


@dataclass(frozen=True)
class Dot:
    finding: str
    severity: str
    x: float
    y: float
    text: str


@dataclass(frozen=True)
class TimelineTick:
    x: float
    label: str


@dataclass
class Timeline:
    width: int
    height: int
    x0: float
    x1: float
    axis_y: float
    lanes: list[Lane] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    dots: list[Dot] = field(default_factory=list)
    ticks: list[TimelineTick] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.ticks


def layout(artifacts: list[tuple[str, int | None, int | None]], findings: Sequence[Finding],
           width: int = 960, own_clock: frozenset[str] | set[str] = frozenset()) -> Timeline:
    """artifacts: (name, start_ns, end_ns); findings: the report's findings (their evidence
    rows become dots on their artifact's lane); own_clock: artifacts the aligner left on their
    own clock, drawn as labelled lanes without a bar (their times are not the axis's)."""
    artifacts = [(f"{name} (own clock, not aligned)", None, None) if name in own_clock else (name, s, e)
                 for name, s, e in artifacts]
    times = [t for _, s, e in artifacts for t in (s, e) if t]
    times += [t for f in findings for t in (f.start_ts, f.end_ts) if t]
    x0, x1 = LABEL_W, width - PAD_R
    lanes_top = FINDINGS_ROW_H
    height = lanes_top + ROW_H * len(artifacts) + AXIS_H
    tl = Timeline(width=width, height=height, x0=x0, x1=x1, axis_y=height - AXIS_H)
    if not times:
        tl.lanes = [Lane(name, lanes_top + i * ROW_H) for i, (name, _, _) in enumerate(artifacts)]
        return tl
    t0, t1 = min(times), max(times)
    span = max(t1 - t0, 1)

    def x(t: int) -> float:
        return round(x0 + (t - t0) / span * (x1 - x0), 2)

    lane_y = {}
    for i, (name, start, end) in enumerate(artifacts):
        y = lanes_top + i * ROW_H
        lane_y[name] = y
        if start:
            tl.lanes.append(Lane(name, y, x(start), max(MIN_MARK_W, x(end or start) - x(start))))
        else:
            tl.lanes.append(Lane(name, y))
    for f in findings:
        start = f.start_ts
        if not start:
            continue
        end = max(f.end_ts or start, start)
        tl.marks.append(Mark(f.id, f.title, f.severity, x(start), max(MIN_MARK_W, x(end) - x(start)), 6))
        for ev in f.evidence:
            if ev.ts and ev.artifact in lane_y:
                tl.dots.append(Dot(f.id, f.severity, x(ev.ts), lane_y[ev.artifact] + ROW_H / 2, ev.text[:200]))
    if t0 >= WALL_CLOCK_FROM_NS:
        step = tick_offsets(span)[1] if span > 1 else 1
        first = -(-t0 // step) * step  # round wall-clock values: 09:32:20, 09:32:30 ...
        tl.ticks = [TimelineTick(x(t), format_wall(t, step, with_date=i == 0))
                    for i, t in enumerate(range(first, t1 + 1, step))]
    else:
        tl.ticks = [TimelineTick(x(t0 + off), format_offset(off)) for off in tick_offsets(span)]
    return tl


def tick_offsets(span_ns: int, target: int = 6) -> list[int]:
    """Offsets (ns from the start) at a 1-2-5 step giving about `target` ticks."""
    step = max(int(nice_step(span_ns / target)), 1)
    return list(range(0, span_ns + 1, step))


def format_wall(ns: int, step: int, with_date: bool = False) -> str:
    """UTC wall-clock time with as many decimals as `step` needs; the date on the first tick."""
    when = datetime.fromtimestamp(ns // 10**9, timezone.utc)
    digits = 0
    while digits < 9 and step % 10 ** (9 - digits):
        digits += 1
    clock = when.strftime("%H:%M:%S") + (f".{ns % 10**9:09d}"[:digits + 1] if digits else "")
    return f"{when:%Y-%m-%d} {clock} UTC" if with_date else clock


def format_offset(ns: int) -> str:
    if ns == 0:
        return "0"
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("µs", 10**3)):
        if ns >= scale:
            value = ns / scale
            return f"+{value:g} {unit}" if value == int(value) else f"+{value:.3g} {unit}"
    return f"+{ns} ns"
