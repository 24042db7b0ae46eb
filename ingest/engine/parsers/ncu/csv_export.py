"""Nsight Compute CSV (`ncu --csv --page raw` or `--page details`, also `ncu --csv` console
output with the program's own stdout and `==PROF==` lines before the table).

raw:     wide, one row per kernel launch, metric names as columns, a units row second.
details: long, one row per (kernel, section, metric), rule results as extra rows with
         Rule Name / Rule Type / Rule Description / Estimated Speedup(Type).

Nsight Compute replays kernels one by one: there are no timestamps, so rows carry ts=0 on
a relative clock and keep their launch ID; rules join them by kernel name and ID.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, excerpt
from ingest.engine.io import no_line_matched, read_all
from ingest.engine.parsers.ncu.launch import shape as launch_shape

FORMAT = "ncu_csv"
SOURCE = "ncu"

HEADER_START = '"ID","Process ID","Process Name"'
ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
              "Block Size", "Grid Size", "Device", "CC")
MAX_BYTES = 512 * 1024**2

# SpeedOfLight: (details section, details metric name, raw metric column)
SOL_COMPUTE = ("GPU Speed Of Light Throughput", "Compute (SM) Throughput",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed")
SOL_MEMORY = ("GPU Speed Of Light Throughput", "Memory Throughput",
              "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
SOL_DURATION = ("GPU Speed Of Light Throughput", "Duration", "gpu__time_duration.sum")
OCCUPANCY = ("Occupancy", "Achieved Occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active")
SM_COUNT = ("Launch Statistics", "# SMs", "launch__sm_count")
SM_COUNT_RAW_FALLBACK = "device__attribute_multiprocessor_count"
# Nsight Compute's SOLBottleneck rule: below 60 % of peak on both units = latency bound
LATENCY_BOUND_BELOW_PCT = 60.0
TIME_UNIT_NS = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
                "s": 1e9, "second": 1e9}
RULE_SEVERITY = {"OPT": "warning", "WRN": "warning", "INF": "info", "ERR": "error"}


def sniff(head: bytes, name: str) -> bool:
    return HEADER_START.encode() in head


def number(text: str) -> float:
    """'3,197,510,010.01' -> 3197510010.01; text that is not a number -> NaN."""
    try:
        return float(text.replace(",", ""))
    except (ValueError, AttributeError):
        return math.nan


def bottleneck(compute_pct: float, memory_pct: float) -> str | None:
    if math.isnan(compute_pct) or math.isnan(memory_pct):
        return None
    if max(compute_pct, memory_pct) < LATENCY_BOUND_BELOW_PCT:
        return "latency"
    return "compute" if compute_pct >= memory_pct else "memory"


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    text = read_all(path, MAX_BYTES).decode("utf-8", errors="replace")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(HEADER_START)), None)
    if start is None:
        raise ParseError(str(path), "line 1", f"an Nsight Compute CSV header starting {HEADER_START}",
                         got=no_line_matched(path))
    report.meta["preamble_lines"] = start
    report.set_clock(Clock("relative", note="Nsight Compute replays kernels one at a time: no timestamps"))
    rows = csv.reader(lines[start:])
    header = next(rows)
    missing = [c for c in ("ID", "Kernel Name") if c not in header]
    if missing:
        raise ParseError(str(path), f"line {start + 1}", f"columns {missing} in the ncu header",
                         got=f"a header without them: {excerpt(lines[start])}")
    if "Section Name" in header and "Metric Name" in header:
        report.meta["page"] = "details"
        _details(header, rows, start + 2, sink, report)
    else:
        report.meta["page"] = "raw"
        _raw(path, header, rows, start + 2, sink, report)


def _kernel_row(sink: EventSink, rec: dict[str, str], metrics: dict[str, float], dur_ns: float,
                line: int, extra: dict) -> None:
    compute, memory = metrics.get("compute", math.nan), metrics.get("memory", math.nan)
    attrs = {
        "id": rec.get("ID"), "process_name": rec.get("Process Name"), "host_name": rec.get("Host Name"),
        "block_size": rec.get("Block Size"), "grid_size": rec.get("Grid Size"), "cc": rec.get("CC"),
        "context": rec.get("Context"),
        "compute_throughput_pct": _json_num(compute), "memory_throughput_pct": _json_num(memory),
        "achieved_occupancy_pct": _json_num(metrics.get("occupancy", math.nan)),
        "duration_ns": _json_num(dur_ns), "duration_text": _duration_text(dur_ns),
        "bottleneck": bottleneck(compute, memory),
        **launch_shape(rec.get("Block Size"), rec.get("Grid Size"), metrics.get("sm_count", math.nan)), **extra,
    }
    sink.emit(ts=0, dur=0 if math.isnan(dur_ns) else int(round(dur_ns)), kind="kernel",
              name=rec.get("Kernel Name", ""), pid=_int(rec.get("Process ID")),
              device=_int(rec.get("Device")), stream=_int(rec.get("Stream")),
              attrs=attrs, loc=f"line {line}")


def _duration_text(ns: float) -> str | None:
    """"55.3 ms", "632 µs": the kernel's duration as a finding says it."""
    if math.isnan(ns):
        return None
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


def _json_num(v: float):
    return None if math.isnan(v) else v


def _int(text: str | None) -> int:
    v = number(text or "")
    return int(v) if not math.isnan(v) and v.is_integer() and abs(v) < 2**63 else -1


def _raw(path: Path, header: list[str], rows, first_line: int, sink: EventSink,
         report: ParseReport) -> None:
    units = next(rows, None)
    if units is None or (units and units[0]):
        raise ParseError(str(path), f"line {first_line}",
                         "the units row of `ncu --page raw` (first cell empty)",
                         got="the end of the file" if units is None else f"a row starting {excerpt(units[0])}")
    unit_of = dict(zip(header, units))
    col = {name: i for i, name in enumerate(header)}
    for line, row in enumerate(rows, first_line + 1):
        if not row or row[0].startswith("=="):
            continue
        if len(row) != len(header):
            report.skipped["ncu row with a wrong number of fields"] += 1
            report.warn(f"line {line}: {len(row)} fields, expected {len(header)}; skipped")
            continue
        rec = dict(zip(header, row))

        def metric(spec: tuple[str, str, str], row: list[str] = row) -> float:  # this row's, bound now
            i = col.get(spec[2])
            return number(row[i]) if i is not None else math.nan
        dur = metric(SOL_DURATION) * TIME_UNIT_NS.get(unit_of.get(SOL_DURATION[2], "ns"), math.nan)
        all_metrics = {h: (v if math.isnan(number(v)) else number(v), unit_of.get(h, ""))
                       for h, v in rec.items() if h not in ID_COLUMNS and v != ""}
        sms = metric(SM_COUNT)
        if math.isnan(sms) and SM_COUNT_RAW_FALLBACK in col:
            sms = number(row[col[SM_COUNT_RAW_FALLBACK]])
        _kernel_row(sink, rec, {"compute": metric(SOL_COMPUTE), "memory": metric(SOL_MEMORY),
                                "occupancy": metric(OCCUPANCY), "sm_count": sms}, dur, line,
                    {"metrics": {k: v for k, (v, _) in all_metrics.items()},
                     "units": {k: u for k, (_, u) in all_metrics.items() if u}})


_BLANK = dict.fromkeys(ID_COLUMNS + ("Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name"), "")


def _details(header: list[str], rows, first_line: int, sink: EventSink, report: ParseReport) -> None:
    kernels: dict[str, dict] = {}   # ID -> first record, SOL metrics, first line
    for line, row in enumerate(rows, first_line):
        if not row or row[0].startswith("=="):
            continue
        if len(row) > len(header) or len(row) < len(ID_COLUMNS):
            report.skipped["ncu row with a wrong number of fields"] += 1
            report.warn(f"line {line}: {len(row)} fields, expected {len(header)}; skipped")
            continue
        rec = {**_BLANK, **dict(zip(header, row + [""] * (len(header) - len(row))))}  # damaged headers lack columns
        k = kernels.setdefault(rec["ID"], {"rec": rec, "metrics": {}, "line": line})
        section, metric_name, unit = rec["Section Name"], rec["Metric Name"], rec["Metric Unit"]
        if rec.get("Rule Name"):
            _rule_row(sink, rec, line)
            continue
        if not metric_name:
            report.skipped["ncu row without metric or rule"] += 1
            continue
        value = number(rec["Metric Value"])
        for key, spec in (("compute", SOL_COMPUTE), ("memory", SOL_MEMORY),
                          ("occupancy", OCCUPANCY), ("duration", SOL_DURATION), ("sm_count", SM_COUNT)):
            if (section, metric_name) == spec[:2]:
                k["metrics"][key] = value * (TIME_UNIT_NS.get(unit, math.nan) if key == "duration" else 1)
        attrs = {"kernel": rec["Kernel Name"], "id": rec["ID"], "section": section}
        if math.isnan(value):
            attrs["text"] = rec["Metric Value"]
        sink.emit(ts=0, kind="sample", name=f"{section}/{metric_name}", value=value, unit=unit,
                  pid=_int(rec["Process ID"]), device=_int(rec["Device"]), stream=_int(rec["Stream"]),
                  attrs=attrs, loc=f"line {line}")
    for k in kernels.values():
        _kernel_row(sink, k["rec"], k["metrics"], k["metrics"].get("duration", math.nan), k["line"], {})


def _rule_row(sink: EventSink, rec: dict[str, str], line: int) -> None:
    rule_type = rec.get("Rule Type", "")
    speedup = number(rec.get("Estimated Speedup", ""))
    sink.emit(ts=0, kind="marker", name=rec["Rule Name"], severity=RULE_SEVERITY.get(rule_type, "info"),
              pid=_int(rec["Process ID"]), device=_int(rec["Device"]), stream=_int(rec["Stream"]),
              value=speedup, loc=f"line {line}",
              attrs={"kernel": rec["Kernel Name"], "id": rec["ID"], "section": rec["Section Name"],
                     "rule_type": rule_type, "estimated_speedup": _json_num(speedup),
                     "estimated_speedup_type": rec.get("Estimated Speedup Type") or None,
                     "description": rec.get("Rule Description", "")})
