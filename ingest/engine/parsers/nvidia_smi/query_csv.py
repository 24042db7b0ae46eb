"""`nvidia-smi --query-gpu=... --format=csv[,nounits]` with any column set.

The header names the columns (units in brackets: "memory.used [MiB]"); values may carry
their unit ("79.65 W") or not (nounits), and "[N/A]" / "[Not Supported]" mean no value.
A headerless file (`noheader`) cannot be read: the columns are unknown, so it is left to
the generic log parser. Memory columns are converted to bytes so that "mem.used" means
the same thing here and in NVML samples. Timestamps are local time without a zone (read as
UTC, flagged tz_assumed for the aligner).
"""
from __future__ import annotations

import csv
import io
import re2  # linear time: detection and parsing run these on untrusted lines

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, excerpt
from ingest.engine.parsers.nvidia_smi.common import device_index
from ingest.engine.parsers.telemetry import CLOCK_EVENT_REASONS, ThrottleTracker, iter_lines, row_time

FORMAT = "nvidia_smi_csv"
SOURCE = "nvidia_smi"

NAMESPACES = {"timestamp", "index", "name", "uuid", "pci", "utilization", "memory", "power", "temperature",
              "clocks", "clocks_event_reasons", "clocks_throttle_reasons", "pcie", "ecc", "fan", "pstate",
              "driver_version", "serial", "enforced", "retired_pages", "remapped_rows", "gpu"}
IDENTITY = {"index", "gpu", "name", "uuid", "pci.bus_id", "serial", "driver_version", "vbios_version"}
# nvidia-smi field -> the metric name NVML samples use
METRIC_NAMES = {
    "utilization.gpu": "gpu.util", "utilization.memory": "mem.util", "memory.used": "mem.used",
    "memory.free": "mem.free", "memory.total": "mem.total", "power.draw": "power",
    "power.limit": "power.limit", "temperature.gpu": "temp", "temperature.memory": "temp.mem",
    "clocks.sm": "clock.sm", "clocks.current.sm": "clock.sm", "clocks.mem": "clock.mem",
    "clocks.current.memory": "clock.mem", "clocks.gr": "clock.graphics",
    "clocks.current.graphics": "clock.graphics",
}
# nvidia-smi's fixed units, for headers written without them (nounits under a custom header)
DEFAULT_UNITS = {"memory": "MiB", "power": "W", "temperature": "C", "clocks": "MHz", "utilization": "%"}
UNIT_BYTES = {"MiB": 2**20, "KiB": 2**10, "GiB": 2**30, "B": 1}
MASK_COLUMNS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
# per-reason "Active"/"Not Active" columns -> NVML bit
REASON_BITS = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
    "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
}
assert set(REASON_BITS.values()) <= set(CLOCK_EVENT_REASONS)
_HEADER_UNIT = re2.compile(r"^(?P<field>[^\[]+?)\s*\[(?P<unit>[^\]]*)\]$")
_VALUE = re2.compile(r"^(?P<num>[-+]?\d+(?:\.\d+)?)\s*(?P<unit>[A-Za-z%/]*)$")


def sniff(head: bytes, name: str) -> bool:
    line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    if "," not in line:
        return False
    fields = [_split_header(c)[0] for c in line.split(",")]
    known = sum(1 for f in fields if f.split(".", 1)[0] in NAMESPACES)
    return known >= 2 and known >= len(fields) // 2 and any("." in f for f in fields)


def _split_header(cell: str) -> tuple[str, str]:
    cell = cell.strip()
    m = _HEADER_UNIT.match(cell)
    return (m["field"], m["unit"]) if m else (cell, "")


def parse(path, sink: EventSink, report: ParseReport) -> None:
    lines = iter_lines(path)
    header = next(lines, (1, ""))[1]
    try:
        columns = [_split_header(c) for c in next(csv.reader([header], skipinitialspace=True), [])]
    except csv.Error as e:
        raise ParseError(str(path), "line 1", "a CSV header of nvidia-smi query fields",
                         got=f"{excerpt(header)} ({e})") from None
    fields = [f for f, _ in columns]
    if len(fields) < 2:
        raise ParseError(str(path), "line 1", "a CSV header of nvidia-smi query fields",
                         got=f"{len(fields)} column(s): {excerpt(header)}")
    device_col = "gpu" if "gpu" in fields else "index"
    throttle = ThrottleTracker(sink)
    devices: dict[int, dict] = {}
    tz_assumed = rows = 0
    for lineno, line in lines:
        if not line.strip():
            continue
        loc = f"line {lineno}"
        try:
            cells = next(csv.reader(io.StringIO(line), skipinitialspace=True), [])
        except csv.Error as e:  # a stray CR or quote: the row, not the file, is broken
            report.warn(f"{loc}: not a CSV row ({e}); skipped")
            report.skipped["unreadable CSV row"] += 1
            continue
        if len(cells) != len(fields):
            report.warn(f"{loc}: {len(cells)} values for {len(fields)} columns; skipped")
            report.skipped["row with a wrong column count"] += 1
            continue
        row = dict(zip(fields, (c.strip() for c in cells)))
        ts = rows
        if "timestamp" in row:
            parsed = row_time(row["timestamp"], loc, report)
            if parsed is None:
                continue
            ts, assumed = parsed
            tz_assumed += assumed
        rows += 1
        device = device_index(row.get(device_col))
        mask = _emit_cells(sink, report, columns, cells, devices.setdefault(device, {}), ts, device, loc)
        if mask is not None:
            throttle.update(ts, device, mask, loc)
    if not rows:
        raise ParseError(str(path), "line 2", "at least one row of nvidia-smi query values",
                         got=f"no usable row ({skipped:,} skipped)" if (skipped := sum(report.skipped.values()))
                         else "no row")
    report.meta["devices"] = [{"index": d, **v} for d, v in sorted(devices.items())]
    if "timestamp" not in fields:
        report.set_clock(Clock("none", "no timestamp column: rows are in capture order"))
    else:
        report.set_clock(Clock("unix", "nvidia-smi local time without a zone, read as UTC",
                               tz_assumed=bool(tz_assumed)))


def _emit_cells(sink: EventSink, report: ParseReport, columns: list, cells: list[str], inventory: dict,
                ts: int, device: int, loc: str) -> int | None:
    """One row's values: identity fields into the device's inventory, numbers as samples; returns
    the row's clocks-event reasons mask (None: the row has no reason columns)."""
    mask = None
    for (field, unit), text in zip(columns, (c.strip() for c in cells)):
        if field == "timestamp":
            continue
        if field in IDENTITY:
            inventory.setdefault(field, text)
            continue
        if field in MASK_COLUMNS:
            mask = _mask(text)
            continue
        reason = field.rsplit(".", 1)[-1]
        if field.startswith(("clocks_event_reasons.", "clocks_throttle_reasons.")) and reason in REASON_BITS:
            if text == "Active":
                mask = (mask or 0) | REASON_BITS[reason]
            elif text == "Not Active" and mask is None:
                mask = 0
            continue
        _sample(sink, report, ts, device, field, unit, text, loc)
    return mask


def _mask(text: str) -> int:
    """"0x0000000000000004" (or decimal) -> the NVML reason mask; 0 when unreadable."""
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return 0
    return value if 0 <= value < 2**63 else 0


def _sample(sink, report, ts, device, field, unit, text, loc) -> None:
    if not text or text.startswith("[") or text in ("N/A", "Unknown Error"):
        return  # [N/A], [Not Supported]: no value
    m = _VALUE.match(text)
    if field == "pstate" and text.startswith("P") and text[1:].isdigit():
        value, unit = float(text[1:]), ""
    elif m:
        value = float(m["num"])
        unit = m["unit"] or unit or DEFAULT_UNITS.get(field.split(".", 1)[0], "")
    else:
        report.skipped[f"non-numeric column {field}"] += 1
        return
    if unit in UNIT_BYTES:
        value, unit = value * UNIT_BYTES[unit], "bytes"
    name = METRIC_NAMES.get(field, field)
    sink.emit(ts=ts, kind="sample", name=name, unit=unit, value=value, device=device, loc=loc)
    if field.startswith(("ecc.errors.uncorrected", "retired_pages.double_bit")) and value > 0:
        sink.emit(ts=ts, kind="error", name="EccUncorrectable", device=device, value=value,
                  severity="critical", loc=loc, attrs={"field": field})
