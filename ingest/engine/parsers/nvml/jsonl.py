"""NVML samples as JSON lines: one object per sample (a pynvml sampler loop, an agent,
or SuperBench's monitor with "metric:gpu" keys).

Each numeric field becomes a `sample` row (normalized name and unit), the clock-event
(throttle) mask becomes "ThrottleReason" markers when its set changes, Xid fields become
`error` rows named "Xid", and per-process memory (`procs`) becomes samples with a pid.
"""
from __future__ import annotations

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.telemetry import (
    ThrottleTracker, first_json_object, iter_json_lines, parse_wallclock,
)

FORMAT = "nvml_jsonl"
SOURCE = "nvml"

# field -> (metric name, unit, scale). Fields not listed keep their own name, no unit.
METRICS = {
    "util_gpu": ("gpu.util", "%", 1), "gpu_usage": ("gpu.util", "%", 1),
    "util_mem": ("mem.util", "%", 1),
    "mem_used": ("mem.used", "bytes", 1), "gpu_mem_used": ("mem.used", "bytes", 1),
    "mem_free": ("mem.free", "bytes", 1),
    "mem_total": ("mem.total", "bytes", 1), "gpu_mem_total": ("mem.total", "bytes", 1),
    "power_mw": ("power", "W", 1e-3), "power_w": ("power", "W", 1),
    "gpu_power_limit": ("power.limit", "W", 1),
    "temp_c": ("temp", "C", 1), "gpu_temperature": ("temp", "C", 1),
    "sm_clock_mhz": ("clock.sm", "MHz", 1), "mem_clock_mhz": ("clock.mem", "MHz", 1),
    "pcie_tx_kbs": ("pcie.tx", "KB/s", 1), "pcie_rx_kbs": ("pcie.rx", "KB/s", 1),
    "gpu_corrected_ecc": ("ecc.corrected", "count", 1),
    "gpu_uncorrected_ecc": ("ecc.uncorrected", "count", 1),
    "cpu_usage": ("cpu.util", "%", 1),
}
TIME_KEYS = ("ts_ns", "timestamp_ns", "time_ns")
WALLCLOCK_KEYS = ("time", "timestamp", "ts")
THROTTLE_KEYS = ("throttle_reasons", "clocks_event_reasons", "clock_event_reasons")
XID_KEYS = ("xid", "xid_errors", "last_xid")
SAMPLER_KEYS = {"util_gpu", "mem_used", "power_mw", "temp_c", "sm_clock_mhz", "gpu_usage:0",
                "gpu_mem_used:0", "gpu_temperature:0", "throttle_reasons"}


def sniff(head: bytes, name: str) -> bool:
    first = first_json_object(head)
    return first is not None and len(SAMPLER_KEYS & first.keys()) >= 2


def parse(path, sink: EventSink, report: ParseReport) -> None:
    throttle = ThrottleTracker(sink)
    last_ecc: dict[int, float] = {}
    tz_assumed = good = 0
    for lineno, rec in iter_json_lines(path, report):
        loc = f"line {lineno}"
        if not isinstance(rec, dict):
            report.skipped["non-object line"] += 1
            continue
        ts, assumed = _timestamp(rec)
        if ts is None:
            report.warn(f"{loc}: no timestamp (expected ts_ns or time); skipped")
            report.skipped["sample without timestamp"] += 1
            continue
        tz_assumed += assumed
        good += 1
        host = str(rec.get("host", rec.get("hostname", "")))
        default_dev = clamp_int(rec.get("gpu", rec.get("index", -1)))
        for key, value in rec.items():
            field, _, dev_text = key.partition(":")  # SuperBench: "gpu_usage:3"
            device = clamp_int(dev_text) if dev_text else default_dev
            device = device if -1 <= device < 2**31 else -1  # the device column is int32
            if field in TIME_KEYS or field in WALLCLOCK_KEYS or field in ("gpu", "index", "host", "hostname"):
                continue
            if field == "procs":
                _procs(sink, ts, device, host, value, loc)
            elif field in THROTTLE_KEYS:
                if isinstance(value, int):
                    throttle.update(ts, device, value, loc, host)
            elif field in XID_KEYS:
                if isinstance(value, int) and value > 0:
                    sink.emit(ts=ts, kind="error", name="Xid", device=device, host=host, value=float(value),
                              severity="critical", loc=loc, attrs={"xid": value})
            elif field == "error":
                sink.emit(ts=ts, kind="log", name="NvmlQueryFailed", device=device, host=host,
                          severity="warning", loc=loc, attrs={"text": str(value)})
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                name, unit, scale = METRICS.get(field, (field, "", 1))
                sink.emit(ts=ts, kind="sample", name=name, unit=unit, value=float(value) * scale,
                          device=device if field != "cpu_usage" else -1, host=host, loc=loc)
                if name == "ecc.uncorrected" and value > last_ecc.get(device, 0):
                    sink.emit(ts=ts, kind="error", name="EccUncorrectable", device=device, host=host,
                              value=float(value), severity="critical", loc=loc,
                              attrs={"count": value, "previous": last_ecc.get(device, 0)})
                if name == "ecc.uncorrected":
                    last_ecc[device] = value
    if not good:
        raise ParseError(str(path), "line 1", "NVML samples as JSON lines with a timestamp (ts_ns or time)",
                         got=no_line_matched(path))
    note = "NVML sampler wall clock"
    if tz_assumed:
        report.set_clock(Clock("unix", note + "; local time without a zone, read as UTC",
                               tz_assumed=True))
    else:
        report.set_clock(Clock("unix", note))


def _timestamp(rec: dict) -> tuple[int | None, bool]:
    for k in TIME_KEYS:
        v = rec.get(k)
        if isinstance(v, int):
            return v, False
    for k in WALLCLOCK_KEYS:
        v = rec.get(k)
        if isinstance(v, str):
            parsed = parse_wallclock(v)
            if parsed:
                return parsed
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(v * 1e9), False  # float seconds since the epoch (time.time())
    return None, False


def _procs(sink: EventSink, ts: int, device: int, host: str, procs, loc: str) -> None:
    if not isinstance(procs, list):
        return
    for p in procs:
        used = p.get("used", p.get("used_memory")) if isinstance(p, dict) else None
        if isinstance(used, int):
            sink.emit(ts=ts, kind="sample", name="proc.mem.used", unit="bytes", value=float(used),
                      device=device, host=host, pid=clamp_int(p.get("pid")), loc=loc,
                      attrs={k: v for k, v in p.items() if k not in ("pid", "used", "used_memory")})
