"""`nvidia-smi dmon [-s ...] [-o DT]`: a `#` header line of column names, a `#` line of
units, then one whitespace-separated row per GPU per second; "-" means no value. The header
repeats every screenful. Without `-o D` rows carry only the time of day: their date is
unknown, so they are stamped on 1970-01-01 and flagged date_assumed (the aligner moves
them to the trace's day). Local time without a zone is read as UTC (tz_assumed).
"""
from __future__ import annotations

from collections.abc import Iterator

from ingest.clock import Clock
from ingest.events import EventSink, ParseError, ParseReport
from ingest.parsers.nvidia_smi.common import device_index
from ingest.parsers.telemetry import iter_lines, parse_wallclock

FORMAT = "nvidia_smi_dmon"
SOURCE = "nvidia_smi"

DAY_NS = 86_400 * 10**9
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
    names: list[str] = []
    units: list[str] = []
    clock = RowClock()
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        if line.startswith("#"):
            words = line[1:].split()
            if words and words[0].lower() in ("time", "date", "gpu"):
                names, units = [w.lower() for w in words], []
            elif names and len(words) == len(names):
                units = words
            continue
        loc = f"line {lineno}"
        cells = line.split()
        if not names or len(cells) != len(names):
            report.warn(f"{loc}: {len(cells)} values for {len(names)} header columns; skipped")
            report.skipped["row not matching the header"] += 1
            continue
        row = dict(zip(names, cells))
        ts = clock.stamp(row)
        if ts is None:
            report.skipped["row with a bad time"] += 1
            continue
        device = device_index(row.get("gpu"))
        for col, name, unit, value in figures(row, names, units, COLUMNS, report):
            sink.emit(ts=ts, kind="sample", name=name, unit=unit, value=value, device=device, loc=loc)
            if col == "dbecc" and value > 0:
                sink.emit(ts=ts, kind="error", name="EccUncorrectable", device=device, value=value,
                          severity="critical", loc=loc, attrs={"field": "dbecc"})
    if not clock.rows:
        raise ParseError(str(path), "line 1", "nvidia-smi dmon rows under a '# gpu ...' header")
    report.set_clock(clock.declared(names, "dmon", "rows are in capture order, 1 s apart"))


def figures(row: dict, names: list[str], units: list[str], columns: dict[str, tuple[str, str]],
            report: ParseReport) -> Iterator[tuple[str, str, str, float]]:
    """(column, metric, unit, value) of a dmon/pmon row's figures in header order: "-" is no
    value, a non-number is counted as skipped, the units line's unit wins over the column's
    own, and MB (nvidia-smi's MB are MiB) become bytes."""
    for i, col in enumerate(names):
        text = row.get(col, "-")
        if col not in columns or text == "-":
            continue
        try:
            value = float(text)
        except ValueError:
            report.skipped[f"non-numeric {col}"] += 1
            continue
        name, unit = columns[col]
        unit = units[i] if i < len(units) and units[i] not in ("-", "#") else unit
        if unit == "MB":
            value, unit = value * 2**20, "bytes"
        yield col, name, unit, value


class RowClock:
    """Time of each dmon/pmon row: `-o T` gives the time of day (a wrap past midnight moves
    to the next day), `-o DT` adds the local date; without a time column a row's time is
    its index in capture order."""

    def __init__(self) -> None:
        self.rows = 0
        self._day_offset = 0
        self._last_tod: int | None = None

    def stamp(self, row: dict) -> int | None:
        """The row's time in ns; None when its time column is unreadable (the row is skipped)."""
        tod = _time_of_day(row.get("time", ""))
        if "time" in row and tod is None:
            return None
        ts = self.rows
        if tod is not None:
            if self._last_tod is not None and tod < self._last_tod - DAY_NS // 2:
                self._day_offset += DAY_NS  # past midnight
            self._last_tod = tod
            ts = _date_ns(row.get("date", "")) + self._day_offset + tod
        self.rows += 1
        return ts

    @staticmethod
    def declared(names: list[str], tool: str, unstamped: str) -> Clock:
        """The clock the rows are on, from the time columns the capture has."""
        if "time" not in names:
            return Clock("none", f"{tool} without -o T: {unstamped}")
        if "date" not in names:
            return Clock("unix", f"{tool} -o T: time of day only, date and zone unknown",
                         date_assumed=True, tz_assumed=True)
        return Clock("unix", f"{tool} -o DT: local time read as UTC", tz_assumed=True)


def _time_of_day(text: str) -> int | None:
    parts = text.split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    h, m, s = (int(p) for p in parts)
    return ((h * 60 + m) * 60 + s) * 10**9


def _date_ns(text: str) -> int:
    if len(text) == 8 and text.isdigit():
        parsed = parse_wallclock(f"{text[:4]}-{text[4:6]}-{text[6:]} 00:00:00")
        if parsed:
            return parsed[0]
    return 0
