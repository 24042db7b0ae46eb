"""Helpers shared by the GPU telemetry, host-profiling and JSON-lines parsers (NVML,
nvidia-smi, DCGM, perf, bpftrace, token latency, OTLP JSON): text and JSON lines with
their numbers, wall-clock strings, throttle reasons."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import orjson

from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.io import TRUNCATED_GZIP, open_bytes

# NVML's nvmlClocksEventReason* bits (formerly nvmlClocksThrottleReason*), nvml.h.
CLOCK_EVENT_REASONS = {
    0x1: "GpuIdle",
    0x2: "ApplicationsClocksSetting",
    0x4: "SwPowerCap",
    0x8: "HwSlowdown",
    0x10: "SyncBoost",
    0x20: "SwThermalSlowdown",
    0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown",
    0x100: "DisplayClockSetting",
    0x200: "BoardLimit",
    0x400: "Reliability",
}
# Reasons that slow a busy GPU down (the others are benign: idle, app clocks, display).
SLOWDOWN_REASONS = frozenset({"SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown",
                              "HwPowerBrakeSlowdown", "BoardLimit", "Reliability", "SyncBoost"})

MAX_LINE = 1 << 20  # a longer "line" is not text telemetry: cut, and the record is skipped


def decode_clock_event_reasons(mask: int) -> list[str]:
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"Unknown(0x{unknown:x})")
    return names


class ThrottleTracker:
    """Emits a "ThrottleReason" marker per device only when its set of reasons changes."""

    def __init__(self, sink: EventSink):
        self.sink = sink
        self.last: dict[int, list[str]] = {}  # device: its reasons last emitted

    def update(self, ts: int, device: int, mask: int, loc: str, host: str = "") -> None:
        reasons = decode_clock_event_reasons(mask)
        if self.last.get(device) == reasons:
            return
        self.last[device] = reasons
        slowdown = [r for r in reasons if r in SLOWDOWN_REASONS]
        self.sink.emit(ts=ts, kind="marker", name="ThrottleReason", device=device, host=host,
                       value=float(mask), severity="warning" if slowdown else "info", loc=loc,
                       attrs={"reasons": reasons, "mask": f"0x{mask:x}", "slowdown": slowdown})


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text without the newline), gzip-transparent, undecodable bytes
    replaced; a gzip stream that ends early becomes a ParseError naming the line."""
    lineno = 0
    try:
        with open_bytes(path) as f:
            for raw in f:
                lineno += 1
                yield lineno, raw[:MAX_LINE].decode("utf-8", "replace").rstrip("\r\n")
    except EOFError as e:
        raise ParseError(str(path), f"line {lineno + 1}", "a complete gzip stream",
                         got=TRUNCATED_GZIP) from e
    except OSError as e:
        raise ParseError(str(path), f"line {lineno + 1}", "a readable gzip stream", got=f"damaged data ({e})") from e


def first_json_object(head: bytes) -> dict | None:
    """The head's first line decoded, when it is a JSON object (how JSON-lines formats sniff)."""
    line = head.lstrip().split(b"\n", 1)[0]
    if not line.startswith(b"{"):
        return None
    try:
        first = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return first if isinstance(first, dict) else None


def iter_json_lines(path: Path, report) -> Iterator[tuple[int, object]]:
    """(line number, decoded JSON value) of each non-blank line; a line that is not JSON is
    skipped with a warning naming its line and column, and counted in the report."""
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            yield lineno, orjson.loads(line)
        except orjson.JSONDecodeError as e:
            report.warn(f"line {lineno}, column {e.colno}: not valid JSON ({e.msg}); skipped")
            report.skipped["unreadable JSON line"] += 1


_WALLCLOCK_FORMATS = (
    "%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S",
    "%a %b %d %H:%M:%S %Y",
)
_ISO = re.compile(r"\d{4}-\d\d-\d\dT")


def parse_wallclock(text: str) -> tuple[int, bool] | None:
    """ns since the epoch and whether the time zone was assumed (UTC) because the text has
    none, as nvidia-smi and most samplers print local time without a zone; None if unreadable."""
    text = text.strip()
    dt = None
    if _ISO.match(text):
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        for fmt in _WALLCLOCK_FORMATS:
            try:
                dt = datetime.strptime(" ".join(text.split()), fmt)
                break
            except ValueError:
                continue
    if dt is None:
        return None
    assumed = dt.tzinfo is None
    if assumed:
        dt = dt.replace(tzinfo=timezone.utc)
    return _to_ns(dt), assumed


def row_time(text: str, loc: str, report: ParseReport) -> tuple[int, bool] | None:
    """A row's timestamp cell as parse_wallclock gives it; None when unreadable, after saying
    so in the report and counting the row as skipped."""
    parsed = parse_wallclock(text)
    if parsed is None:
        report.warn(f"{loc}: unreadable timestamp {text[:40]!r}; skipped")
        report.skipped["row with a bad timestamp"] += 1
    return parsed


def _to_ns(dt: datetime) -> int:
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    delta = dt - epoch
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def seconds_to_ns(text: str) -> int:
    """'2580.382527' -> 2580382527000 exactly (no float rounding)."""
    whole, _, frac = text.partition(".")
    return int(whole) * 1_000_000_000 + int((frac + "000000000")[:9] or 0)
