"""DCGM exporter output: the Prometheus text exposition of DCGM_FI_* metrics (what
`curl host:9400/metrics` returns), and dcgm-exporter's counter configuration CSV.

Metrics become `sample` rows named like NVML samples where a counterpart exists ("gpu.util",
"mem.used" in bytes, ...; attrs.field keeps the DCGM name, attrs the labels); DCGM's blank
sentinels (no value / not supported) are dropped; the last Xid becomes an `error` row "Xid",
the clock-event mask "ThrottleReason" markers; ECC double-bit and row-remap failures errors.

The counter CSV (`DCGM_FI_X, gauge, help`) is configuration, not measurements: it becomes
one "DcgmExporterConfig" marker listing enabled and commented-out counters, so a report can
say which signals the capture could not have (ECC and throttle counters are off by default).
"""
from __future__ import annotations

import re

import re2  # linear time: detection and parsing run these on untrusted lines

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.telemetry import ThrottleTracker, iter_lines

FORMAT = "dcgm"
SOURCE = "dcgm"

_SAMPLE = re2.compile(r"^(?P<metric>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)"
                     r"(?:\s+(?P<ts>-?\d+))?\s*$")
# A label name starts after a non-word character (labels are comma-separated): without the
# look-behind, findall retries from every character of a long word and the scan is quadratic.
_LABEL = re.compile(r'(?<![A-Za-z0-9_])(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*"(?P<value>(?:[^"\\]|\\.)*)"')
_CONFIG = re2.compile(r"^\s*(?:#\s*)?(?P<field>DCGM_[A-Z0-9_]+)\s*,\s*(?P<type>gauge|counter|label|histogram)\s*,"
                     r"\s*(?P<help>.*)$")
# DCGM_*_BLANK and the NOT_FOUND / NOT_SUPPORTED / NOT_PERMISSIONED values right above it
_BLANKS = ((0x7FFFFFF0, 0x7FFFFFF3), (0x7FFFFFFFFFFFFFF0, 0x7FFFFFFFFFFFFFF3), (2.0**47, 2.0**47 + 3))
# DCGM field -> (NVML-style name, unit, scale)
NAMES = {
    "DCGM_FI_DEV_GPU_UTIL": ("gpu.util", "%", 1), "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem.util", "%", 1),
    "DCGM_FI_DEV_FB_USED": ("mem.used", "bytes", 2**20), "DCGM_FI_DEV_FB_FREE": ("mem.free", "bytes", 2**20),
    "DCGM_FI_DEV_FB_TOTAL": ("mem.total", "bytes", 2**20), "DCGM_FI_DEV_POWER_USAGE": ("power", "W", 1),
    "DCGM_FI_DEV_GPU_TEMP": ("temp", "C", 1), "DCGM_FI_DEV_MEMORY_TEMP": ("temp.mem", "C", 1),
    "DCGM_FI_DEV_SM_CLOCK": ("clock.sm", "MHz", 1), "DCGM_FI_DEV_MEM_CLOCK": ("clock.mem", "MHz", 1),
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": ("pcie.tx", "KB/s", 1), "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": ("pcie.rx", "KB/s", 1),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy", "mJ", 1),
}
THROTTLE_FIELDS = ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
ERROR_FIELDS = {  # field -> (error name, severity) when the value is > 0
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("EccUncorrectable", "critical"),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("EccUncorrectable", "critical"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("RowRemapFailure", "critical"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("RowRemapUncorrectable", "error"),
    "DCGM_FI_DEV_RETIRED_DBE": ("RetiredPages", "error"),
}


def sniff(head: bytes, name: str) -> bool:
    text = head[:8192].decode("utf-8", "replace")
    for line in text.splitlines():
        line = line.strip()
        if not line or (line.startswith("#") and not line.startswith(("# HELP", "# TYPE", "# DCGM_"))):
            continue
        return line.startswith(("DCGM_", "# HELP DCGM_", "# TYPE DCGM_", "# DCGM_")) and (
            bool(_SAMPLE.match(line)) or bool(_CONFIG.match(line)) or line.startswith("# "))
    return False


def parse(path, sink: EventSink, report: ParseReport) -> None:
    lines = list(iter_lines(path))
    first = next((t for _, t in lines if t.strip() and not t.lstrip().startswith("#")), "")
    if _CONFIG.match(first):
        _parse_config(path, lines, sink, report)
    else:
        _parse_metrics(path, lines, sink, report)


def _parse_metrics(path, lines, sink: EventSink, report: ParseReport) -> None:
    throttle = ThrottleTracker(sink)
    samples, stamped, blanks = 0, 0, 0
    for lineno, text in lines:
        line = text.strip()
        if not line or line.startswith("#"):
            continue
        loc = f"line {lineno}"
        m = _SAMPLE.match(line)
        if not m:
            report.skipped["line that is not a metric sample"] += 1  # e.g. "..." elisions
            continue
        raw = m["value"]
        try:  # compare sentinels as integers: floats cannot tell 2**63-16 from 2**63-14
            number = int(raw) if raw.lstrip("-").isdigit() else float(raw)
        except ValueError:
            report.skipped["sample with a non-numeric value"] += 1
            continue
        value = float(number)
        if any(lo <= number <= hi for lo, hi in _BLANKS):
            blanks += 1
            continue
        labels = {k: v for k, v in _LABEL.findall(m["labels"] or "")}
        ts = samples
        if m["ts"]:
            ts, stamped = int(m["ts"]) * 1_000_000, stamped + 1  # exposition timestamps are ms
        samples += 1
        field = m["metric"]
        device = clamp_int(labels.pop("gpu", None))
        device = device if -1 <= device < 2**31 else -1  # the device column is int32
        host = labels.get("Hostname", "")
        if field in THROTTLE_FIELDS:
            throttle.update(ts, device, int(value), loc, host)
            continue
        if field == "DCGM_FI_DEV_XID_ERRORS":
            if value > 0:
                sink.emit(ts=ts, kind="error", name="Xid", device=device, host=host, value=value,
                          severity="critical", loc=loc, attrs={"xid": int(value), **labels})
            continue
        name, unit, scale = NAMES.get(field, (field, "", 1))
        sink.emit(ts=ts, kind="sample", name=name, unit=unit, value=value * scale, device=device, host=host,
                  loc=loc, attrs={"field": field, **labels})
        if field in ERROR_FIELDS and value > 0:
            err, severity = ERROR_FIELDS[field]
            sink.emit(ts=ts, kind="error", name=err, device=device, host=host, value=value, severity=severity,
                      loc=loc, attrs={"field": field, **labels})
    if not samples and not blanks:
        raise ParseError(str(path), "line 1", "DCGM_FI_* metric samples in Prometheus text format",
                         got=no_line_matched(path))
    if blanks:
        report.warn(f"{blanks} sample(s) held DCGM's blank sentinel (no value / not supported): dropped")
    report.set_clock(Clock("unix", "Prometheus sample timestamps (ms)") if stamped == samples and samples
                     else Clock("none", "a scrape without timestamps: one point in time"))


def _parse_config(path, lines, sink: EventSink, report: ParseReport) -> None:
    enabled: list[dict[str, str]] = []
    disabled: list[dict[str, str]] = []
    for _lineno, text in lines:
        m = _CONFIG.match(text)
        if not m:
            continue
        entry = {"field": m["field"], "type": m["type"], "help": m["help"].strip()}
        (disabled if text.lstrip().startswith("#") else enabled).append(entry)
    if not enabled:
        raise ParseError(str(path), "line 1", "dcgm-exporter counter lines 'DCGM_FI_X, gauge|counter, help'",
                         got=no_line_matched(path))
    report.format = "dcgm_exporter_config"
    report.warn("dcgm-exporter counter configuration: lists what is collected, holds no measurements")
    report.set_clock(Clock("none", "configuration file"))
    report.meta["dcgm_counters"] = [e["field"] for e in enabled]
    sink.emit(ts=0, kind="marker", name="DcgmExporterConfig", loc="line 1",
              attrs={"enabled": enabled, "disabled": [e["field"] for e in disabled]})
