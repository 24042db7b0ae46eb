"""nvidia-smi snapshots: `nvidia-smi -q` (device inventory), the default `nvidia-smi`
table and `nvidia-smi topo -m`. One module because they are one tool's point-in-time
views; report.format says which one a file was.

* `-q` (also `-q -d ...`, `-a`, `-q -l N` with one "==NVSMI LOG==" banner per snapshot, and a
  paste without the banner that still starts at "Timestamp"/"Driver Version"): per GPU and
  snapshot one "GpuInventory" marker (name, uuid, driver, CUDA, memory, ECC mode and counters,
  retired pages, remapped rows, MIG devices, the whole section tree under attrs.details),
  report.meta["devices"]; ECC errors, retired pages and row-remap failures become `error`
  rows; active clock-event reasons a "ThrottleReason" marker; gauges (memory, utilisation,
  temperature, power) and per-process memory as samples. The rows are the ones the `-q -x`
  XML parser emits (both go through `nvidia_smi.common.emit_gpu`).
* the table: per-GPU samples (temp, power, power.limit, mem.used/total, gpu.util) and
  per-process memory; an uncorrectable ECC count > 0 is an `error` row.
* `topo -m`: one "GpuTopology" marker per GPU/NIC row (links, CPU and NUMA affinity).

`-q` output changes with every driver (390 ... 610+), Windows (WDDM) and MIG mode: a section
may be printed as a scalar ("Remapped Rows : N/A", "Processes : None"), a scalar may carry
children ("Process ID : 42" above its Type/Name), keys repeat, values are "N/A",
"[Not Supported]" or "Requested functionality has been deprecated". The tree below takes all
of that as data; lookups tolerate every shape.
"""
from __future__ import annotations

import re

import re2  # linear time: detection and parsing run these on untrusted lines

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int
from ingest.engine.io import no_line_matched
from ingest.engine.parsers.nvidia_smi.common import MIB, GpuReport, device_index, emit_gpu, norm, number
from ingest.engine.parsers.telemetry import ThrottleTracker, iter_lines, parse_wallclock

FORMAT = "nvidia_smi"
SOURCE = "nvidia_smi"

MAX_LINES = 2_000_000        # a -q of 8 GPUs is ~2,000 lines; more is not a snapshot
MAX_DEPTH = 16               # -q nests 5 levels deep; the tree stays shallow whatever the input
MAX_TABLE_LINE = 512         # table rows are ~90 chars; longer lines are not table rows
_ANSI = re2.compile(r"\x1b\[[0-9;]*m")
_GPU_SECTION = re2.compile(r"^GPU (?P<bus>[0-9A-Fa-f]{1,8}(?::[0-9A-Fa-f]{1,8}){1,2}(?:\.[0-9A-Fa-f]{1,2})?)$")
_NUM = re2.compile(r"^(?P<num>[-+]?\d+(?:\.\d+)?)\s*(?P<unit>\S*)$")
_TABLE_GPU = re2.compile(r"^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persist>On|Off|WDDM|TCC)\s+\|"
                        r"\s+(?P<bus>\S+)\s+(?P<disp>\S+)\s+\|\s+(?P<ecc>\S+)\s+\|")
_TABLE_STATE = re2.compile(r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\d+)C\s+(?P<perf>P\d+|\S+)\s+(?P<power>\S+?)W?\s*/"
                          r"\s*(?P<cap>\S+?)W?\s+\|\s+(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s+\|"
                          r"\s+(?P<util>\d+)%")
_TABLE_PROC = re2.compile(r"^\|\s+(?P<gpu>\d+)\s+\S+\s+\S+\s+(?P<pid>\d+)\s+(?P<type>\S+)\s+(?P<proc>.+?)"
                         r"\s+(?P<mem>\d+)MiB\s*\|")
_Q_FIRST_KEYS = ("Timestamp", "Driver Version", "Attached GPUs")


def sniff(head: bytes, name: str) -> bool:
    return _kind(head) is not None


# what a program's log says and nvidia-smi never prints
_LOG_MARKERS = (b"Traceback (most recent call last):", b"CUDA out of memory", b"CUDA error: ", b"OutOfMemoryError")


def _only_table(head: bytes) -> bool:
    """The default table (date lines and up to two lines such as a prompt above it allowed), not a
    log that pastes one: a traceback or log lines around the table make the file a log."""
    lines = _ANSI.sub("", head.decode("utf-8", "replace")).splitlines()
    if len(head) >= 60_000 and lines:
        lines.pop()  # the head may end inside a line
    in_table, above = False, 0
    for line in (l.strip() for l in lines):
        if not line or parse_wallclock(line):
            continue
        if line.startswith(("|", "+")):
            in_table = True
        elif in_table or above >= 2:
            return False
        else:
            above += 1
    return True


def _kind(head: bytes) -> str | None:
    if any(m in head for m in _LOG_MARKERS):
        return None  # a log that pastes nvidia-smi output: the log parser keeps both
    if b"==NVSMI LOG==" in head[:2048]:
        return "q"
    # the banner names the driver "Driver Version:", or "KMD Version:" beside "CUDA UMD Version:" (driver 580+
    # on Windows and in newer releases)
    if b"NVIDIA-SMI " in head[:4096] and (b"Driver Version:" in head[:4096] or b"KMD Version:" in head[:4096]) \
            and b"+---" in head[:4096]:
        return "table" if _only_table(head) else None
    text = _ANSI.sub("", head[:4096].decode("utf-8", "replace"))
    first = text.strip().split("\n", 1)[0]
    if "CPU Affinity" in first and re.search(r"\b(GPU|NIC)\d+\b", first):
        return "topo"
    # a pasted -q without its banner: starts at the header keys and has a GPU section
    if first.startswith(_Q_FIRST_KEYS) and "Attached GPUs" in text and any(
            _GPU_SECTION.match(line.strip()) for line in text.splitlines()):
        return "q"
    return None


def parse(path, sink: EventSink, report: ParseReport) -> None:
    lines = []
    for n, text in iter_lines(path):
        if n > MAX_LINES:
            report.warn(f"line {n}: more than {MAX_LINES:,} lines; the rest is not read")
            break
        lines.append((n, _ANSI.sub("", text)))
    kind = _kind("\n".join(t for _, t in lines[:60]).encode())
    if kind is None:
        raise ParseError(str(path), "line 1", "nvidia-smi -q, table or topo -m output", got=no_line_matched(path))
    report.format = f"nvidia_smi_{kind}"
    {"q": _parse_q, "table": _parse_table, "topo": _parse_topo}[kind](path, lines, sink, report)


# ---- nvidia-smi -q ------------------------------------------------------------------

def _parse_q(path, lines, sink: EventSink, report: ParseReport) -> None:
    throttle = ThrottleTracker(sink)
    devices: dict[str, dict] = {}
    stamped = unstamped = 0
    ts = 0
    for top, gpus in _snapshots(lines):
        stamp = parse_wallclock(_text(_find(top, "Timestamp")))
        if stamp:
            ts, stamped = stamp[0], stamped + 1
        else:
            unstamped += 1
        for position, ((lineno, bus), info) in enumerate(gpus):
            gpu = _gpu_report(top, info, bus, position, f"line {lineno}")
            emit_gpu(sink, ts, throttle, gpu)
            devices[bus] = {k: v for k, v in gpu.inventory.items() if not isinstance(v, (dict, list))}
    if not devices:
        raise ParseError(str(path), "line 1", "at least one 'GPU <bus id>' section in the nvidia-smi -q output",
                         got=no_line_matched(path))
    report.meta["devices"] = list(devices.values())
    if stamped:
        report.set_clock(Clock("unix", "nvidia-smi -q Timestamp, local time read as UTC", tz_assumed=True))
        if unstamped:
            report.warn(f"{unstamped} snapshot(s) without a readable Timestamp: placed at the previous one's time")
    else:
        report.set_clock(Clock("none", "no Timestamp line"))


def _snapshots(lines):
    """[(top-level dict, [((line, bus id), gpu dict)])], one per "==NVSMI LOG==" banner
    (`nvidia-smi -q -l N` repeats the whole report)."""
    chunk: list = []
    for lineno, text in lines:
        if "==NVSMI LOG==" in text and any(t.strip() for _, t in chunk):
            yield _tree(chunk)
            chunk = []
        chunk.append((lineno, text))
    if chunk:
        yield _tree(chunk)


def _tree(lines) -> tuple[dict, list]:
    """Indented "Key : Value" lines -> the top-level dict and [((line, bus id), gpu dict)].

    A scalar followed by deeper lines becomes a dict keeping its value under "_value"; a
    repeated key gets a " #2", " #3" suffix (processes repeat "Process ID")."""
    top: dict = {}
    gpus: list = []
    stack: list[tuple[int, dict]] = [(-1, top)]
    last: tuple[int, dict, str] | None = None   # the previous scalar line: indent, parent, key
    repeats: dict[tuple[int, str], int] = {}
    for lineno, raw in lines:
        text = raw.expandtabs(4).rstrip()
        body = text.strip()
        if not body or body.startswith("=="):
            continue
        indent = len(text) - len(text.lstrip(" "))
        if gpu := _GPU_SECTION.match(body):
            node: dict = {}
            gpus.append(((lineno, gpu["bus"]), node))
            stack, last = [(-1, top), (indent, node)], None
            continue
        key, colon, value = body.partition(":")
        key = key.strip()
        if not key:
            continue
        if last is not None and indent > last[0] and len(stack) < MAX_DEPTH:
            li, lparent, lkey = last
            promoted = {"_value": lparent[lkey]}
            lparent[lkey] = promoted
            stack.append((li, promoted))
        last = None
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if key in parent:  # "Process ID" per process, "Graphics" per supported clock
            n = repeats.get((id(parent), key), 1) + 1
            repeats[(id(parent), key)] = n
            key = f"{key} #{n}"
        if colon:
            parent[key] = value.strip()
            last = (indent, parent, key)
        else:
            child: dict = {}
            parent[key] = child
            if len(stack) < MAX_DEPTH:  # deeper than nvidia-smi ever nests: kept flat, not recursed into
                stack.append((indent, child))
    return top, gpus


# Lookups that tolerate every shape: names are matched after norm() (case, spaces), a section
# printed as a scalar reads as an empty section and a section read as a scalar as its "_value".

_INDEX: dict[int, tuple[dict, dict]] = {}  # id(tree) -> (tree, {norm(key): value}), per GPU report


def _find(tree: object, *names: str) -> object:
    """The first child of `tree` named like one of `names` (None when absent)."""
    if not isinstance(tree, dict):
        return None
    cached = _INDEX.get(id(tree))
    if cached is None or cached[0] is not tree:  # each section is indexed once: linear in its keys
        by_norm: dict = {}
        for k, v in tree.items():
            by_norm.setdefault(norm(k), v)
        cached = _INDEX[id(tree)] = (tree, by_norm)
    for name in names:
        found = cached[1].get(norm(name))
        if found is not None:
            return found
    return None


def _section(tree: object, *path: str) -> dict:
    for name in path:
        found = _find(tree, name)
        tree = found if isinstance(found, dict) else {}
    return tree if isinstance(tree, dict) else {}


def _text(value: object) -> str:
    if isinstance(value, dict):
        value = value.get("_value", "")
    return value.strip() if isinstance(value, str) else ""


def _deep(tree: dict, *names: str, depth: int = 0) -> str:
    """The first value named like `names` anywhere under `tree` (power limits moved into a
    "GPU Ceiling Power Limit" subsection in 610)."""
    direct = _text(_find(tree, *names))
    if direct or depth > 4:
        return direct
    for value in tree.values():
        if isinstance(value, dict):
            found = _deep(value, *names, depth=depth + 1)
            if found:
                return found
    return ""


def _numeric_leaves(tree: object, prefix: str = "", depth: int = 0) -> dict[str, float]:
    """{"Volatile/DRAM Uncorrectable": 3.0, ...} for the numbers in a section."""
    found: dict[str, float] = {}
    if not isinstance(tree, dict) or depth > 8:
        return found
    for k, v in tree.items():
        if isinstance(v, dict):
            found.update(_numeric_leaves(v, f"{prefix}{k}/", depth + 1))
            v = v.get("_value")
        parsed = number(v)
        if parsed is not None and k != "_value":
            found[f"{prefix}{k}"] = parsed[0]
    return found


def _flat(tree: object, depth: int = 0) -> dict[str, str]:
    """Every scalar under `tree` by normalized name (nested throttle reasons included)."""
    out: dict[str, str] = {}
    if not isinstance(tree, dict) or depth > 8:
        return out
    for k, v in tree.items():
        if k == "_value":
            continue
        if isinstance(v, dict):
            if isinstance(v.get("_value"), str):
                out.setdefault(norm(k), v["_value"])
            for nk, nv in _flat(v, depth + 1).items():
                out.setdefault(nk, nv)
        elif isinstance(v, str):
            out.setdefault(norm(k), v)
    return out


def _gpu_report(top: dict, info: dict, bus: str, position: int, loc: str) -> GpuReport:
    _INDEX.clear()
    gpu = GpuReport(index=device_index(_text(_find(info, "Minor Number")), position), loc=loc, details=info)
    driver = _text(_find(top, "Driver Version")).split(" [", 1)[0] or _text(_find(top, "KMD Version"))
    cuda = _text(_find(top, "CUDA Version")).split(" [", 1)[0] or _text(_find(top, "CUDA UMD Version"))
    fb = _section(info, "FB Memory Usage")
    gpu.inventory = {
        "index": gpu.index, "name": _text(_find(info, "Product Name")), "uuid": _text(_find(info, "GPU UUID")),
        "bus_id": bus, "driver": driver, "cuda": cuda, "memory_total": _text(_find(fb, "Total")),
        "ecc_mode": _text(_find(_section(info, "ECC Mode"), "Current")),
        "mig_mode": _text(_find(_section(info, "MIG Mode"), "Current")),
        "driver_model": _text(_find(_section(info, "Driver Model"), "Current")),
    }
    _q_samples(gpu, info)
    ecc = _section(info, "ECC Errors")
    gpu.ecc = _numeric_leaves(ecc)
    gpu.repair = {k: _text(v) for k, v in ecc.items()
                  if any(w in norm(k) for w in ("repairpending", "unrepairable"))}
    retired = _section(info, "Retired Pages")
    gpu.retired = {k: v for k, v in _numeric_leaves(retired).items() if "bit" in norm(k)}
    gpu.retired_pending = any(_text(_find(retired, n)) == "Yes"
                              for n in ("Pending Page Blacklist", "Pending Page Retirement"))
    remap = _section(info, "Remapped Rows")
    gpu.remap = {k: v for k, v in _numeric_leaves(remap).items() if "histogram" not in norm(k)}
    gpu.remap_details = {k: _text(v) for k, v in remap.items() if not isinstance(v, dict)}
    gpu.remap_failure = _text(_find(remap, "Remapping Failure Occurred")) == "Yes"
    gpu.remap_pending = _text(_find(remap, "Pending")) == "Yes"
    gpu.reasons = _flat(_section(info, "Clocks Event Reasons") or _section(info, "Clocks Throttle Reasons"))
    gpu.processes = _q_processes(_section(info, "Processes"))
    gpu.mig_devices = _q_mig(_section(info, "MIG Devices"))
    for mig in gpu.mig_devices:  # a MIG instance's SRAM errors are the GPU's errors
        gpu.ecc.update({f"MIG {mig['device']}/{k}": v for k, v in mig["ecc"].items()})
    return gpu


def _q_samples(gpu: GpuReport, info: dict) -> None:
    fb = _section(info, "FB Memory Usage")
    gpu.sample("mem.used", _text(_find(fb, "Used")), "MiB")
    gpu.sample("mem.total", _text(_find(fb, "Total")), "MiB")
    util = _section(info, "Utilization")
    gpu.sample("gpu.util", _text(_find(util, "GPU")), "%")
    gpu.sample("mem.util", _text(_find(util, "Memory")), "%")
    temp = _section(info, "Temperature")
    gpu.sample("temp", _text(_find(temp, "GPU Current Temp", "GPU")), "C")
    gpu.sample("temp.mem", _text(_find(temp, "Memory Current Temp")), "C")
    power = _section(info, "GPU Power Readings") or _section(info, "Power Readings")
    gpu.sample("power", _text(_find(power, "Average Power Draw", "Power Draw", "Instantaneous Power Draw")), "W")
    gpu.sample("power.limit", _deep(power, "Current Power Limit", "Enforced Power Limit", "Power Limit"), "W")
    clocks = _section(info, "Clocks")
    gpu.sample("clock.sm", _text(_find(clocks, "SM")), "MHz")
    gpu.sample("clock.mem", _text(_find(clocks, "Memory")), "MHz")


def _q_processes(section: dict) -> list[dict]:
    procs = []
    for key, value in section.items():
        if norm(key.split(" #", 1)[0]) != "processid":
            continue
        pid = clamp_int(_text(value))
        if pid < 0:
            continue
        used = number(_text(_find(value, "Used GPU Memory")))
        procs.append({"pid": pid, "type": _text(_find(value, "Type")), "name": _text(_find(value, "Name")),
                      "used_bytes": used[0] * MIB if used else None})
    return procs


def _q_mig(section: dict) -> list[dict]:
    devices = []
    for key, value in section.items():
        if not isinstance(value, dict):
            continue
        fb = _section(value, "FB Memory Usage")
        total, used = number(_text(_find(fb, "Total"))), number(_text(_find(fb, "Used")))
        devices.append({"device": key, "gpu_instance": _text(_find(value, "GPU Instance ID")),
                        "compute_instance": _text(_find(value, "Compute Instance ID")),
                        "memory_total": total[0] * MIB if total else None,
                        "memory_used": used[0] * MIB if used else None,
                        "ecc": _numeric_leaves(_section(value, "ECC Errors"))})
    return devices


# ---- the default table --------------------------------------------------------------

def _parse_table(path, lines, sink: EventSink, report: ParseReport) -> None:
    ts, stamped = 0, False
    for _, text in lines[:3]:
        parsed = parse_wallclock(text.strip())
        if parsed:
            ts, stamped = parsed[0], True
            break
    report.set_clock(Clock("unix", "table header date, local time read as UTC", tz_assumed=True)
                     if stamped else Clock("none", "no date line above the table"))
    device, gpus = -1, 0
    for lineno, text in lines:
        loc = f"line {lineno}"
        if len(text) > MAX_TABLE_LINE:
            continue
        if m := _TABLE_GPU.match(text):
            device, gpus = device_index(m["index"]), gpus + 1
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
                      device=device_index(m["gpu"]), pid=clamp_int(m["pid"]), loc=loc,
                      attrs={"process": m["proc"], "type": m["type"]})
    if not gpus:
        raise ParseError(str(path), "line 1", "an nvidia-smi table with at least one GPU row",
                         got=no_line_matched(path))


# ---- topo -m ------------------------------------------------------------------------

def _parse_topo(path, lines, sink: EventSink, report: ParseReport) -> None:
    report.set_clock(Clock("none", "topo -m has no timestamp; placed at the trace start"))
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
                  device=device_index(label[3:]) if label.startswith("GPU") else -1,
                  attrs={"label": label, "links": links, "cpu_affinity": row.get("CPU Affinity", ""),
                         "numa_affinity": row.get("NUMA Affinity", ""), "gpu_numa_id": row.get("GPU NUMA ID", "")})
    if not rows:
        raise ParseError(str(path), "line 2", "topology rows (GPU0 ...) under the topo -m header",
                         got="no GPU or NIC row" if header else "no header")
