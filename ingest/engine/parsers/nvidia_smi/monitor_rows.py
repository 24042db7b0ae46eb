"""The rows of `nvidia-smi dmon` and `nvidia-smi pmon` captures, read by one loop: `#` header
lines (column names, then units) that repeat every screenful, then one whitespace-separated
row per GPU (dmon) or per process (pmon) per interval, stamped by the capture's time columns.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from ingest.engine.clock import Clock
from ingest.engine.events import ParseReport
from ingest.engine.parsers.telemetry import iter_lines, parse_wallclock

DAY_NS = 86_400 * 10**9


class MonitorRows:
    """One capture's rows as (loc, ts, {column: cell}); `names`, `units` and `clock` are the
    latest header's and the rows' clock once read. `is_header(words)` tells a names line
    among the `#` lines (lowercased words); with `command_last` the last column is free text
    that may hold spaces and may be missing (pmon's command), else a row has one cell per
    column. Rows before any header are skipped as `before_header` (None: as rows that do not
    match the header, with a warning)."""

    def __init__(self, is_header: Callable[[list[str]], bool], *, command_last: bool,
                 before_header: str | None) -> None:
        self.names: list[str] = []
        self.units: list[str] = []
        self.clock = RowClock()
        self._is_header, self._command_last, self._before_header = is_header, command_last, before_header

    def read(self, path, report: ParseReport) -> Iterator[tuple[str, int, dict[str, str]]]:
        for lineno, line in iter_lines(path):
            if not line.strip():
                continue
            if line.startswith("#"):
                words = line[1:].split()
                lowered = [w.lower() for w in words]
                if self._is_header(lowered):
                    self.names, self.units = lowered, []
                elif self.names and self._fits(len(words)):
                    self.units = words
                continue
            loc = f"line {lineno}"
            if not self.names and self._before_header is not None:
                report.skipped[self._before_header] += 1
                continue
            cells = line.split(None, len(self.names) - 1) if self._command_last else line.split()
            if not self._fits(len(cells)):
                report.warn(f"{loc}: {len(cells)} values for {len(self.names)} header columns; skipped")
                report.skipped["row not matching the header"] += 1
                continue
            row = dict(zip(self.names, cells))
            ts = self.clock.stamp(row)
            if ts is None:
                report.skipped["row with a bad time"] += 1
                continue
            yield loc, ts, row

    def _fits(self, count: int) -> bool:
        """Whether a line of `count` words fills the header's columns (the command may be missing)."""
        n = len(self.names)
        return count >= n - 1 if self._command_last else count == n


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
