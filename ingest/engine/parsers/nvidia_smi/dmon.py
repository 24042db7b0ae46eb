"""`nvidia-smi dmon [-s ...] [-o DT]`: a `#` header line of column names, a `#` line of
units, then one whitespace-separated row per GPU per second; "-" means no value. The header
repeats every screenful. Without `-o D` rows carry only the time of day: their date is
unknown, so they are stamped on 1970-01-01 and flagged date_assumed (the aligner moves
them to the trace's day). Local time without a zone is read as UTC (tz_assumed).
"""
from __future__ import annotations

from ingest.engine.events import EventSink, ParseError, ParseReport
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.nvidia_smi.common import device_index
from ingest.engine.parsers.nvidia_smi.monitor_rows import MonitorRows, figures

FORMAT = "nvidia_smi_dmon"
SOURCE = "nvidia_smi"

# dmon column -> (metric name as NVML samples call it, unit when the units line lacks one)
COLUMNS = {
    "pwr": ("power", "W"), "gtemp": ("temp", "C"), "mtemp": ("temp.mem", "C"),
    "sm": ("gpu.util", "%"), "mem": ("mem.util", "%"), "enc": ("enc.util", "%"), "dec": ("dec.util", "%"),
    "jpg": ("jpg.util", "%"), "ofa": ("ofa.util", "%"), "mclk": ("clock.mem", "MHz"),
    "pclk": ("clock.sm", "MHz"), "pviol": ("violation.power", "%"), "tviol": ("violation.thermal", "bool"),
    "fb": ("mem.used", "MB"), "bar1": ("bar1.used", "MB"), "ccpm": ("ccpm.used", "MB"),
    "sbecc": ("ecc.sbe", "errs"), "dbecc": ("ecc.dbe", "errs"), "pci": ("pcie.replay", "errs"),
    "rxpci": ("pcie.rx", "MB/s"), "txpci": ("pcie.tx", "MB/s"),
}


def sniff(head: bytes, name: str) -> bool:
    for raw in head.split(b"\n", 3)[:3]:
        words = raw.decode("utf-8", "replace").lstrip("#").lower().split()
        # a "pid" column is `nvidia-smi pmon`: per-process figures, not the device's
        if raw.startswith(b"#") and "gpu" in words and "pid" not in words and len(set(words) & set(COLUMNS)) >= 2:
            return True
    return False


def parse(path, sink: EventSink, report: ParseReport) -> None:
    table = MonitorRows(lambda words: bool(words) and words[0] in ("time", "date", "gpu"), command_last=False,
                        before_header=None)
    for loc, ts, row in table.read(path, report):
        device = device_index(row.get("gpu"))
        for col, name, unit, value in figures(row, table.names, table.units, COLUMNS, report):
            sink.emit(ts=ts, kind="sample", name=name, unit=unit, value=value, device=device, loc=loc)
            if col == "dbecc" and value > 0:
                sink.emit(ts=ts, kind="error", name="EccUncorrectable", device=device, value=value,
                          severity="critical", loc=loc, attrs={"field": "dbecc"})
    if not table.clock.rows:
        raise ParseError(str(path), "line 1", "nvidia-smi dmon rows under a '# gpu ...' header",
                         got=no_line_matched(path))
    report.set_clock(table.clock.declared(table.names, "dmon", "rows are in capture order, 1 s apart"))
