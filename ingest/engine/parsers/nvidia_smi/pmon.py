"""`nvidia-smi pmon [-s um] [-o DT]`: per-process GPU use, one row per process per GPU per
interval under a `# gpu pid type sm mem enc dec [jpg ofa] [fb ccpm] command` header (and a `#`
units line); "-" means no value, and a row whose pid is "-" says that GPU ran no process.

The figures belong to a process, not to the device: they become `proc.*` samples with the
pid and the process name (`proc.sm.util`, `proc.mem.util`, ..., `proc.mem.used` in bytes as
the nvidia-smi table's process rows), never `gpu.util`. Clocks as in dmon: `-o T` gives the
time of day only (date_assumed), `-o DT` the local date and time (tz_assumed), neither the
capture order.
"""
from __future__ import annotations

from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.nvidia_smi.common import device_index
from ingest.engine.parsers.nvidia_smi.monitor_rows import MonitorRows, figures

FORMAT = "nvidia_smi_pmon"
SOURCE = "nvidia_smi"

# pmon column -> (per-process metric, unit when the units line lacks one)
COLUMNS = {
    "sm": ("proc.sm.util", "%"), "mem": ("proc.mem.util", "%"), "enc": ("proc.enc.util", "%"),
    "dec": ("proc.dec.util", "%"), "jpg": ("proc.jpg.util", "%"), "ofa": ("proc.ofa.util", "%"),
    "fb": ("proc.mem.used", "MB"), "ccpm": ("proc.ccpm.used", "MB"),
}
IDENTITY = {"date", "time", "gpu", "pid", "type", "command"}


def sniff(head: bytes, name: str) -> bool:
    for raw in head.split(b"\n", 4)[:4]:
        words = raw.decode("utf-8", "replace").lstrip("#").lower().split()
        if raw.startswith(b"#") and {"gpu", "pid"} <= set(words) and set(words) & (set(COLUMNS) | {"command"}):
            return True
    return False


def parse(path, sink: EventSink, report: ParseReport) -> None:
    table = MonitorRows(lambda words: "gpu" in words and "pid" in words, command_last=True,
                        before_header="row before a '# gpu pid ...' header")
    processes = blank = 0
    for loc, ts, row in table.read(path, report):
        pid = clamp_int(row.get("pid"))
        if pid < 0:
            continue  # "-": no process on this GPU in this interval
        processes += 1
        blank += not _emit_row(sink, report, ts, row, table.names, table.units, pid, loc)
    if blank:
        report.warn(f"{blank:,} of {processes:,} process rows give '-' for every figure (nvidia-smi has no "
                    "per-process counters for MIG instances or Windows WDDM processes): each is kept as a "
                    "proc.present marker, the process and GPU without figures")
    if not table.clock.rows:
        raise ParseError(str(path), "line 1", "nvidia-smi pmon rows under a '# gpu pid type ...' header",
                         got=no_line_matched(path))
    report.meta["processes_seen"] = processes
    report.set_clock(table.clock.declared(table.names, "pmon", "rows are in capture order"))


def _emit_row(sink: EventSink, report: ParseReport, ts: int, row: dict, names: list[str],
              units: list[str], pid: int, loc: str) -> bool:
    """The row's figures as samples; a row with none (every figure "-") as one marker that the process
    ran on that GPU then. False for such a row."""
    device = device_index(row.get("gpu"))
    attrs = {"process": row.get("command", "").strip(), "type": row.get("type", "")}
    emitted = False
    for _, name, unit, value in figures(row, names, units, COLUMNS, report):
        sink.emit(ts=ts, kind="sample", name=name, unit=unit, value=value, device=device, pid=pid,
                  loc=loc, attrs=attrs)
        emitted = True
    if not emitted:
        sink.emit(ts=ts, kind="marker", name="proc.present", device=device, pid=pid, loc=loc, attrs=attrs)
    return emitted
