"""nvidia-smi snapshots: `nvidia-smi -q` (device inventory), the default `nvidia-smi`
table and `nvidia-smi topo -m`. One module because they are one tool's point-in-time
views; report.format says which one a file was.

* `-q`: one "GpuInventory" marker per GPU (name, uuid, driver, CUDA, memory, ECC mode and
  counters, retired pages, remapped rows, the whole section tree under attrs.details),
  report.meta["devices"]; ECC errors, retired pages and row-remap failures become `error`
  rows; active clock-event reasons a "ThrottleReason" marker; a few gauges as samples.
* the table: per-GPU samples (temp, power, power.limit, mem.used/total, gpu.util) and
  per-process memory; an uncorrectable ECC count > 0 is an `error` row.
* `topo -m`: one "GpuTopology" marker per GPU/NIC row (links, CPU and NUMA affinity).
"""
from __future__ import annotations

import re

from ingest.events import EventSink, ParseError, ParseReport, clamp_int
from ingest.parsers._telemetry import ThrottleTracker, clock_meta, iter_lines, parse_wallclock

FORMAT = "nvidia_smi"
SOURCE = "nvidia_smi"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_KV = re.compile(r"^(?P<indent> *)(?P<key>\S[^:]*?)\s*(?::\s*(?P<value>.*?))?\s*$")
_GPU_SECTION = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)\s*$")
_NUM = re.compile(r"^(?P<num>[-+]?\d+(?:\.\d+)?)\s*(?P<unit>\S*)$")
_TABLE_GPU = re.compile(r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persist>On|Off)\s+\|"
                        r"\s+(?P<bus>\S+)\s+(?P<disp>\S+)\s+\|\s+(?P<ecc>\S+)\s+\|")
_TABLE_STATE = re.compile(r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\d+)C\s+(?P<perf>P\d+|\S+)\s+(?P<power>\S+?)W?\s*/"
                          r"\s*(?P<cap>\S+?)W?\s+\|\s+(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s+\|"
                          r"\s+(?P<util>\d+)%")
_TABLE_PROC = re.compile(r"^\|\s+(?P<gpu>\d+)\s+\S+\s+\S+\s+(?P<pid>\d+)\s+(?P<type>\S+)\s+(?P<proc>.+?)"
                         r"\s+(?P<mem>\d+)MiB\s*\|")
MIB = 2**20


def sniff(head: bytes, name: str) -> bool:
    return _kind(head) is not None


def _kind(head: bytes) -> str | None:
    if b"==NVSMI LOG==" in head[:2048]:
        return "q"
    if b"NVIDIA-SMI " in head[:4096] and b"Driver Version:" in head[:4096] and b"+---" in head[:4096]:
        return "table"
    first = _ANSI.sub("", head[:512].decode("utf-8", "replace")).strip().split("\n", 1)[0]
    if "CPU Affinity" in first and re.search(r"\b(GPU|NIC)\d+\b", first):
        return "topo"
    return None


def parse(path, sink: EventSink, report: ParseReport) -> None:
    lines = [(n, _ANSI.sub("", text)) for n, text in iter_lines(path)]
    kind = _kind("\n".join(t for _, t in lines[:60]).encode())
    if kind is None:
        raise ParseError(str(path), "line 1", "nvidia-smi -q, table or topo -m output")
    report.format = f"nvidia_smi_{kind}"
    {"q": _parse_q, "table": _parse_table, "topo": _parse_topo}[kind](path, lines, sink, report)


# ---- nvidia-smi -q ------------------------------------------------------------------

def _parse_q(path, lines, sink: EventSink, report: ParseReport) -> None:
    top, gpus = _tree(lines)
    stamp = parse_wallclock(str(top.get("Timestamp", "")))
    ts = stamp[0] if stamp else 0
    report.meta["clock"] = (clock_meta("unix", "nvidia-smi -q Timestamp, local time read as UTC", tz_assumed=True)
                            if stamp else clock_meta("none", "no Timestamp line"))
    driver, cuda = top.get("Driver Version", ""), top.get("CUDA Version", "")
    throttle = ThrottleTracker(sink)
    devices = []
    for (lineno, bus), info in gpus:
        loc = f"line {lineno}"
        device = clamp_int(info.get("Minor Number"), len(devices))
        fb = info.get("FB Memory Usage", {})
        inv = {
            "index": device, "name": info.get("Product Name", ""), "uuid": info.get("GPU UUID", ""),
            "bus_id": bus, "driver": driver, "cuda": cuda, "memory_total": fb.get("Total", ""),
            "ecc_mode": _get(info, "ECC Mode", "Current"), "ecc_errors": info.get("ECC Errors", {}),
            "retired_pages": info.get("Retired Pages", {}), "remapped_rows": info.get("Remapped Rows", {}),
        }
        devices.append({k: v for k, v in inv.items() if not isinstance(v, dict)})
        sink.emit(ts=ts, kind="marker", name="GpuInventory", device=device, loc=loc,
                  attrs={**inv, "details": info})
        for name, section, unit in (("mem.used", fb.get("Used"), "MiB"), ("mem.total", fb.get("Total"), "MiB"),
                                    ("temp", _get(info, "Temperature", "GPU Current Temp"), "C"),
                                    ("power", _get(info, "GPU Power Readings", "Average Power Draw"), "W"),
                                    ("power.limit", _get(info, "GPU Power Readings", "Current Power Limit"), "W")):
            m = _NUM.match(section or "")
            if m:
                value = float(m["num"]) * (MIB if unit == "MiB" else 1)
                sink.emit(ts=ts, kind="sample", name=name, unit="bytes" if unit == "MiB" else unit,
                          value=value, device=device, loc=loc)
        reasons = info.get("Clocks Event Reasons") or info.get("Clocks Throttle Reasons") or {}
        mask = _reason_mask(reasons)
        if mask is not None:
            throttle.update(ts, device, mask, loc)
        _q_errors(sink, ts, device, info, loc)
    if not devices:
        raise ParseError(str(path), "line 1", "at least one 'GPU <bus id>' section")
    report.meta["devices"] = devices


def _tree(lines) -> tuple[dict, list]:
    """Indented "Key : Value" lines -> the top-level dict and [((line, bus id), gpu dict)]."""
    top: dict = {}
    gpus: list = []
    stack: list[tuple[int, dict]] = [(-1, top)]
    for lineno, text in lines:
        if not text.strip() or text.strip().startswith("=="):
            continue
        if gpu := _GPU_SECTION.match(text):
            node: dict = {}
            gpus.append(((lineno, gpu["bus"]), node))
            stack = [(-1, top), (0, node)]
            continue
        m = _KV.match(text)
        if not m:
            continue
        indent, key, value = len(m["indent"]), m["key"], m["value"]
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if value is None:
            child: dict = {}
            parent[key] = child
            stack.append((indent, child))
        else:
            parent[key] = value
    return top, gpus


def _get(tree: dict, *keys: str) -> str:
    for k in keys:
        tree = tree.get(k, {}) if isinstance(tree, dict) else {}
    return tree if isinstance(tree, str) else ""


def _reason_mask(reasons: dict) -> int | None:
    bits = {"Idle": 0x1, "Applications Clocks Setting": 0x2, "SW Power Cap": 0x4, "HW Slowdown": 0x8,
            "Sync Boost": 0x10, "SW Thermal Slowdown": 0x20, "HW Thermal Slowdown": 0x40,
            "HW Power Brake Slowdown": 0x80, "Display Clock Setting": 0x100}
    # nested reasons ("HW Thermal Slowdown" under "HW Slowdown") land in the same dict
    flat = {k: v for k, v in reasons.items() if isinstance(v, str)}
    if not flat:
        return None
    return sum(bit for name, bit in bits.items() if flat.get(name) == "Active")


def _paths(tree: dict, prefix: str = ""):
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _paths(v, f"{prefix}{k}/")
        else:
            yield f"{prefix}{k}", v


def _q_errors(sink: EventSink, ts: int, device: int, info: dict, loc: str) -> None:
    """ECC counters, retired pages and row remapping that show damaged memory."""
    def counts(section: str, words: tuple[str, ...]) -> dict[str, float]:
        found = {}
        for path, value in _paths(info.get(section, {})):
            m = _NUM.match(value)
            if m and float(m["num"]) > 0 and any(w in path for w in words):
                found[path] = float(m["num"])
        return found

    uncorrectable = counts("ECC Errors", ("Uncorrectable", "Double Bit"))
    correctable = {k: v for k, v in counts("ECC Errors", ("Correctable", "Single Bit")).items()
                   if k not in uncorrectable}
    retired = counts("Retired Pages", ("Single Bit", "Double Bit"))
    remap = info.get("Remapped Rows", {})
    problems = [
        ("EccUncorrectable", "critical", uncorrectable),
        ("EccCorrectable", "warning", correctable),
        ("RetiredPages", "error", retired),
        ("RowRemapUncorrectable", "error", counts("Remapped Rows", ("Uncorrectable Error",))),
    ]
    for name, severity, found in problems:
        if found:
            sink.emit(ts=ts, kind="error", name=name, device=device, value=max(found.values()),
                      severity=severity, loc=loc, attrs={"counters": found})
    if _get(info, "Retired Pages", "Pending Page Blacklist") == "Yes":
        sink.emit(ts=ts, kind="error", name="RetiredPagesPending", device=device, severity="error", loc=loc)
    if isinstance(remap, dict) and remap.get("Remapping Failure Occurred") == "Yes":
        sink.emit(ts=ts, kind="error", name="RowRemapFailure", device=device, severity="critical", loc=loc,
                  attrs={"remapped_rows": remap})
    if isinstance(remap, dict) and remap.get("Pending") == "Yes":
        sink.emit(ts=ts, kind="error", name="RowRemapPending", device=device, severity="warning", loc=loc,
                  attrs={"text": "a row remap is pending: reset the GPU to apply it"})


# ---- the default table --------------------------------------------------------------

def _parse_table(path, lines, sink: EventSink, report: ParseReport) -> None:
    ts, stamped = 0, False
    for _, text in lines[:3]:
        parsed = parse_wallclock(text.strip())
        if parsed:
            ts, stamped = parsed[0], True
            break
    report.meta["clock"] = (clock_meta("unix", "table header date, local time read as UTC", tz_assumed=True)
                            if stamped else clock_meta("none", "no date line above the table"))
    device, gpus = -1, 0
    for lineno, text in lines:
        loc = f"line {lineno}"
        if m := _TABLE_GPU.match(text):
            device, gpus = int(m["index"]), gpus + 1
            if m["ecc"].isdigit() and int(m["ecc"]) > 0:
                sink.emit(ts=ts, kind="error", name="EccUncorrectable", device=device, value=float(m["ecc"]),
                          severity="critical", loc=loc, attrs={"field": "Volatile Uncorr. ECC"})
        elif (m := _TABLE_STATE.match(text)) and device >= 0:
            for name, key, unit, scale in (("temp", "temp", "C", 1), ("power", "power", "W", 1),
                                           ("power.limit", "cap", "W", 1), ("mem.used", "used", "bytes", MIB),
                                           ("mem.total", "total", "bytes", MIB), ("gpu.util", "util", "%", 1)):
                num = _NUM.match(m[key])
                if num:
                    sink.emit(ts=ts, kind="sample", name=name, unit=unit, value=float(num["num"]) * scale,
                              device=device, loc=loc)
        elif m := _TABLE_PROC.match(text):
            sink.emit(ts=ts, kind="sample", name="proc.mem.used", unit="bytes", value=float(m["mem"]) * MIB,
                      device=int(m["gpu"]), pid=int(m["pid"]), loc=loc,
                      attrs={"process": m["proc"], "type": m["type"]})
    if not gpus:
        raise ParseError(str(path), "line 1", "an nvidia-smi table with at least one GPU row")


# ---- topo -m ------------------------------------------------------------------------

def _parse_topo(path, lines, sink: EventSink, report: ParseReport) -> None:
    report.meta["clock"] = clock_meta("none", "topo -m has no timestamp; placed at the trace start")
    header: list[str] = []
    rows = 0
    for lineno, text in lines:
        if not text.strip():
            if header and rows:
                break  # the legend follows
            continue
        cells = [c.strip() for c in text.split("\t")]
        if not header:
            header = [c for c in cells if c]
            continue
        label, values = cells[0], [v for v in cells[1:] if v]  # nvidia-smi pads with extra tabs
        if not re.fullmatch(r"(GPU|NIC)\d+|mlx\S+", label):
            continue
        row = dict(zip(header, values))
        links = {k: v for k, v in row.items() if re.fullmatch(r"(GPU|NIC)\d+", k)}
        rows += 1
        sink.emit(ts=rows - 1, kind="marker", name="GpuTopology", loc=f"line {lineno}",
                  device=int(label[3:]) if label.startswith("GPU") else -1,
                  attrs={"label": label, "links": links, "cpu_affinity": row.get("CPU Affinity", ""),
                         "numa_affinity": row.get("NUMA Affinity", ""), "gpu_numa_id": row.get("GPU NUMA ID", "")})
    if not rows:
        raise ParseError(str(path), "line 2", "topology rows (GPU0 ...) under the topo -m header")
