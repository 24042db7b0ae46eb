"""`nvidia-smi --query-compute-apps=... --format=csv[,noheader][,nounits]`: the GPU memory each
compute process holds, one row per process per GPU (per interval with `-l`).

The figures belong to a process, not to the device: each row becomes a `proc.mem.used` sample in
bytes with the pid and the process name, as the process rows of `nvidia-smi -q` and `pmon` do
(`[N/A]` memory, as WDDM drivers print, gives no sample). The query names no GPU index, so the
device column stays -1 and the GPU's uuid / bus id / name go into attrs.

With a header the columns are named (`pid, process_name, used_gpu_memory [MiB]`). Without one
(`noheader`) the cells are read by their shapes: memory is the last cell (`6010 MiB`, or a bare
integer with `nounits`), the process name the text cell before it, the pid the integer cell
before that; a `GPU-...` uuid, a bus id and an nvidia-smi timestamp are recognised where they
stand. A headerless `nounits` table of three bare cells looks like any CSV, so it is claimed only
when a uuid or timestamp cell, or a file name that says so, confirms it.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass

import re2  # linear time: detection and parsing run these on untrusted lines

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, excerpt
from ingest.engine.parsers.telemetry import iter_lines, row_time

FORMAT = "nvidia_smi_compute_apps"
SOURCE = "nvidia_smi"

# query field (and the name nvidia-smi prints for it) -> our column
FIELDS = {
    "timestamp": "timestamp", "gpu_name": "gpu_name", "gpu_bus_id": "gpu_bus_id", "gpu_serial": "gpu_serial",
    "gpu_uuid": "gpu_uuid", "pid": "pid", "process_name": "process_name", "name": "process_name",
    "used_gpu_memory": "used_memory", "used_memory": "used_memory",
}
UNIT_BYTES = {"MiB": 2**20, "KiB": 2**10, "GiB": 2**30, "B": 1}
NAME_HINTS = ("compute", "apps", "process")
_HEADER_CELL = re2.compile(r"^(?P<field>[a-z_]+)(?:\s*\[(?P<unit>[A-Za-z]{1,4})\])?$")
_MEMORY = re2.compile(r"^(?P<num>\d{1,12})(?:\s*(?P<unit>MiB|KiB|GiB|B))?$")
_INT = re2.compile(r"^\d{1,10}$")
_UUID = re2.compile(r"^(?:GPU|MIG)-[0-9A-Fa-f-]{8,64}$")
_BUS_ID = re2.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_TIMESTAMP = re2.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?$")
_NO_VALUE = ("[N/A]", "N/A", "[Not Supported]", "[Insufficient Permissions]")
HEAD_ROWS = 8


@dataclass(frozen=True)
class Layout:
    """Where each known column sits in a row, and the unit of a bare memory figure."""
    columns: dict[str, int]
    memory_unit: str
    header: bool


def sniff(head: bytes, name: str) -> bool:
    return layout(_head_rows(head), name) is not None


def _head_rows(head: bytes) -> list[list[str]]:
    text = head[:16384].decode("utf-8", "replace")
    lines = [line for line in text.splitlines()[:HEAD_ROWS + 1] if line.strip()]
    if len(head) >= 16384 and len(lines) > 1:
        lines = lines[:-1]  # the head may cut the last line
    return [_cells(line) for line in lines]


def _cells(line: str) -> list[str]:
    try:
        return [c.strip() for c in next(csv.reader([line], skipinitialspace=True), [])]
    except csv.Error:
        return []


def layout(rows: list[list[str]], name: str = "") -> Layout | None:
    """The file's columns when it is a compute-apps table, else None."""
    if not rows or not rows[0]:
        return None
    header = _header_layout(rows[0])
    if header is not None:
        return header
    return _shape_layout(rows, name)


def _header_layout(cells: list[str]) -> Layout | None:
    columns, unit = {}, "MiB"
    for i, cell in enumerate(cells):
        m = _HEADER_CELL.match(cell)
        if not m or m["field"] not in FIELDS:
            return None
        columns[FIELDS[m["field"]]] = i
        if FIELDS[m["field"]] == "used_memory" and m["unit"]:
            unit = m["unit"]
    if "pid" not in columns or len(columns) < 2 or not {"used_memory", "process_name", "gpu_uuid"} & set(columns):
        return None
    return Layout(columns, unit if unit in UNIT_BYTES else "MiB", header=True)


def _shape_layout(rows: list[list[str]], name: str) -> Layout | None:
    width = len(rows[0])
    if not 2 <= width <= 8 or any(len(r) != width for r in rows):
        return None
    layouts = {_row_layout(r) for r in rows}
    if len(layouts) != 1 or None in layouts:
        return None
    (columns,) = layouts
    assert columns is not None
    cols = dict(columns)
    with_units = all(_MEMORY.match(r[-1]) and _MEMORY.match(r[-1])["unit"] for r in rows
                     if r[-1] not in _NO_VALUE)
    confirmed = with_units or "gpu_uuid" in cols or "timestamp" in cols or any(h in name.lower() for h in NAME_HINTS)
    if not confirmed or "pid" not in cols:
        return None
    return Layout(cols, "MiB", header=False)


def _row_layout(cells: list[str]) -> tuple | None:
    """Columns of one headerless row by the shapes of its cells (None: not such a row)."""
    last = cells[-1]
    if not (last in _NO_VALUE or _MEMORY.match(last)):
        return None
    cols = {"used_memory": len(cells) - 1}
    for i, cell in enumerate(cells[:-1]):
        if _TIMESTAMP.match(cell):
            cols.setdefault("timestamp", i)
        elif _UUID.match(cell):
            cols.setdefault("gpu_uuid", i)
        elif _BUS_ID.match(cell):
            cols.setdefault("gpu_bus_id", i)
    free = [i for i in range(len(cells) - 1) if i not in cols.values()]
    texts = [i for i in free if not _INT.match(cells[i])]
    if texts and texts[-1] == len(cells) - 2:
        cols["process_name"] = texts[-1]
    before = cols.get("process_name", len(cells) - 1) - 1
    if before >= 0 and before in free and _INT.match(cells[before]):
        cols["pid"] = before
    if "pid" not in cols or len(texts) > 2:
        return None  # a pid is what makes a row a process; more text than gpu_name + process_name is something else
    named = [i for i in texts if i != cols.get("process_name")]
    if named:
        cols["gpu_name"] = named[0]
    return tuple(sorted(cols.items()))


def parse(path, sink: EventSink, report: ParseReport) -> None:
    lines = list(iter_lines(path))
    rows = [(n, _cells(t)) for n, t in lines if t.strip()]
    # detection chose this parser, which is the confirmation a bare three-cell table needs
    found = layout([cells for _, cells in rows[:HEAD_ROWS]], "compute-apps")
    if found is None:
        got = ("an empty file" if not rows else f"line {rows[0][0]}: no CSV cells" if not rows[0][1]
               else f"line {rows[0][0]}: {excerpt(', '.join(c[:40] for c in rows[0][1][:4]))}")
        raise ParseError(str(path), "line 1", "an nvidia-smi --query-compute-apps CSV (a header naming "
                         "pid and used_gpu_memory, or rows ending in '<MiB>')", got=got)
    if found.header:
        rows = rows[1:]
    seen: set[tuple[int, str]] = set()
    snapshot, samples, no_value, tz_assumed = 0, 0, 0, 0
    pids: dict[int, str] = {}
    gpus: set[str] = set()
    for lineno, cells in rows:
        loc = f"line {lineno}"
        if len(cells) <= max(found.columns.values()):
            report.warn(f"{loc}: {len(cells)} values for {len(found.columns)} columns; skipped")
            report.skipped["row with a wrong column count"] += 1
            continue
        row = {k: cells[i] for k, i in found.columns.items()}
        pid = int(row["pid"]) if _INT.match(row.get("pid", "")) else -1
        gpu = row.get("gpu_uuid") or row.get("gpu_bus_id") or row.get("gpu_serial") or ""
        if (pid, gpu) in seen:  # the same process again: the next interval of `-l`
            snapshot, seen = snapshot + 1, set()
        seen.add((pid, gpu))
        stamp = row_time(row["timestamp"], loc, report) if "timestamp" in row else (snapshot, False)
        if stamp is None:
            continue
        ts, assumed = stamp
        tz_assumed += assumed
        pids.setdefault(pid, row.get("process_name", ""))
        if gpu:
            gpus.add(gpu)
        used = _bytes(row.get("used_memory", ""), found.memory_unit)
        if used is None:
            no_value += 1
            continue
        attrs = {"process": row.get("process_name", "")} | {
            k: row[k] for k in ("gpu_uuid", "gpu_bus_id", "gpu_name", "gpu_serial") if row.get(k)}
        sink.emit(ts=ts, kind="sample", name="proc.mem.used", unit="bytes", value=used, device=-1, pid=pid,
                  loc=loc, attrs=attrs)
        samples += 1
    if no_value:
        report.warn(f"{no_value} process row(s) without a memory figure ([N/A]: the driver does not report "
                    "per-process memory here, as under Windows WDDM)")
    report.meta.update(processes=[{"pid": p, "name": n} for p, n in sorted(pids.items())][:200],
                       gpus=sorted(gpus)[:64], header=found.header)
    if not pids:
        report.warn("no compute process held GPU memory when nvidia-smi ran (the header alone)")
    if "timestamp" in found.columns:
        report.set_clock(Clock("unix", "nvidia-smi local time without a zone, read as UTC",
                               tz_assumed=bool(tz_assumed)))
    else:
        report.set_clock(Clock("none", "no timestamp column: rows are in capture order"))


def _bytes(text: str, unit: str) -> float | None:
    m = _MEMORY.match(text)
    if not m:
        return None
    return float(m["num"]) * UNIT_BYTES[m["unit"] or unit]
