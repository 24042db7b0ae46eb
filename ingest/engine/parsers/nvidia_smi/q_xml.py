"""`nvidia-smi -q -x`: the device report as XML (`<nvidia_smi_log>`, DTD nvsmi_device_v10 ...
v13), read as what it is rather than as a text log. Per GPU the same rows as the `-q` text
parser (one "GpuInventory" marker, memory / utilisation / temperature / power / clock samples,
per-process memory, ECC / retired-page / row-remap `error` rows, "ThrottleReason" markers), so
the hardware rules treat both alike.

Untrusted XML: no entity is ever expanded and no DTD is loaded. A document that declares an
entity or carries an internal DTD subset is refused before ElementTree sees it (the guard pass
below does what defusedxml does); the `<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">`
line nvidia-smi writes is fine, since expat never fetches it.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from xml.parsers import expat

import re2  # linear time: detection runs this on every uploaded file

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int
from ingest.engine.io import GZIP_ERRORS, open_bytes
from ingest.engine.parsers.nvidia_smi.common import MIB, GpuReport, device_index, emit_gpu, norm, number
from ingest.engine.parsers.telemetry import ThrottleTracker, parse_wallclock

FORMAT = "nvidia_smi_xml"
SOURCE = "nvidia_smi"

MAX_BYTES = 64 * 2**20      # 8 GPUs with processes are < 1 MiB; more is not one report
MAX_DEPTH = 12
_ROOT = re2.compile(rb"<nvidia_smi_log[\s>]")
_PROLOG = (b"<?xml", b"<!--", b"<!DOCTYPE", b"<nvidia_smi_log")


class _Refused(Exception):
    """The document asks for something an untrusted file may not have (entities, DTDs)."""


def sniff(head: bytes, name: str) -> bool:
    head = head[:16384].lstrip(b"\xef\xbb\xbf").lstrip()
    return head.startswith(_PROLOG) and bool(_ROOT.search(head))


def parse(path, sink: EventSink, report: ParseReport) -> None:
    data = _read(path)
    root = _safe_parse(path, data)
    if root.tag != "nvidia_smi_log":
        raise ParseError(str(path), "line 1", "an <nvidia_smi_log> document", got=f"a <{root.tag[:40]}> document")
    stamp = parse_wallclock(_t(root.find("timestamp")))
    ts = stamp[0] if stamp else 0
    report.set_clock(Clock("unix", "nvidia-smi -q -x timestamp, local time read as UTC", tz_assumed=True)
                     if stamp else Clock("none", "no <timestamp>"))
    driver = _t(root.find("driver_version")) or _t(root.find("kmd_version"))
    cuda = _t(root.find("cuda_version")) or _t(root.find("cuda_umd_version"))
    throttle = ThrottleTracker(sink)
    devices = []
    for position, elem in enumerate(root.findall("gpu")):
        gpu = _gpu_report(elem, position, driver, cuda)
        emit_gpu(sink, ts, throttle, gpu)
        devices.append({k: v for k, v in gpu.inventory.items() if not isinstance(v, (dict, list))})
    if not devices:
        raise ParseError(str(path), "line 1", "at least one <gpu> element in the nvidia-smi -q -x document",
                         got="none")
    report.meta["devices"] = devices


def _read(path) -> bytes:
    try:
        with open_bytes(path) as f:
            data = f.read(MAX_BYTES + 1)
    except GZIP_ERRORS + (OSError,) as e:
        raise ParseError(str(path), "byte 0", "a readable (gzip) XML file", got=f"{type(e).__name__}: {e}") from None
    if len(data) > MAX_BYTES:
        raise ParseError(str(path), f"byte {MAX_BYTES:,}", "an nvidia-smi -q -x report under 64 MiB",
                         got="a larger file")
    return data


def _safe_parse(path, data: bytes) -> ET.Element:
    """ElementTree's tree of `data`, after a guard pass that refuses entity declarations and
    internal DTD subsets (billion laughs, external entities)."""
    guard = expat.ParserCreate()

    def doctype(name, system_id, public_id, has_internal_subset):
        if has_internal_subset:
            raise _Refused("a DOCTYPE with an internal subset")

    def entity(*args):
        raise _Refused("an entity declaration")

    def external(*args):
        raise _Refused("an external entity reference")

    guard.StartDoctypeDeclHandler = doctype
    guard.EntityDeclHandler = entity
    guard.UnparsedEntityDeclHandler = entity
    guard.ExternalEntityRefHandler = external
    try:
        guard.Parse(data, True)
        return ET.fromstring(data)
    except _Refused as e:
        raise ParseError(str(path), f"line {guard.CurrentLineNumber}",
                         "an nvidia-smi XML report without DTD or entity declarations", got=str(e)) from None
    except (expat.ExpatError, ET.ParseError) as e:
        line, col = getattr(e, "lineno", None) or 0, getattr(e, "offset", None) or 0
        if isinstance(e, ET.ParseError) and getattr(e, "position", None):
            line, col = e.position
        why = expat.ErrorString(e.code) if getattr(e, "code", None) else str(e)
        raise ParseError(str(path), f"line {line}, column {col}",
                         "a well-formed nvidia-smi -q -x XML document", got=f"malformed XML ({why})") from None


def _t(elem: ET.Element | None) -> str:
    return (elem.text or "").strip() if elem is not None else ""


def _first(elem: ET.Element | None, *paths: str) -> str:
    """The first non-empty text among `paths` (tag names moved across DTD versions)."""
    if elem is None:
        return ""
    for p in paths:
        text = _t(elem.find(p))
        if text:
            return text
    return ""


def _deep(elem: ET.Element | None, *tags: str) -> str:
    """The first non-empty text of any descendant tagged like `tags`."""
    if elem is None:
        return ""
    for tag in tags:
        for found in elem.iter(tag):
            if _t(found):
                return _t(found)
    return ""


def _leaves(elem: ET.Element | None, prefix: str = "", depth: int = 0) -> dict[str, float]:
    """{"volatile/dram_uncorrectable": 3.0, ...}: the numbers under an element."""
    found: dict[str, float] = {}
    if elem is None or depth > MAX_DEPTH:
        return found
    for child in elem:
        path = f"{prefix}{child.tag}"
        if len(child):
            found.update(_leaves(child, path + "/", depth + 1))
        else:
            parsed = number(child.text)
            if parsed is not None:
                found[path] = parsed[0]
    return found


def _to_dict(elem: ET.Element, depth: int = 0) -> dict | str:
    """The element as nested dicts (repeated tags get " #2", " #3"), for attrs.details."""
    if not len(elem) or depth > MAX_DEPTH:
        return _t(elem)
    out: dict = {}
    for child in elem:
        key = child.tag
        n = 1
        while key in out:
            n += 1
            key = f"{child.tag} #{n}"
        out[key] = _to_dict(child, depth + 1)
    return out


def _gpu_report(elem: ET.Element, position: int, driver: str, cuda: str) -> GpuReport:
    bus = elem.get("id", "")[:64]
    gpu = GpuReport(index=device_index(_t(elem.find("minor_number")), position), loc=f"gpu {bus or position}")
    fb = elem.find("fb_memory_usage")
    gpu.inventory = {
        "index": gpu.index, "name": _t(elem.find("product_name")), "uuid": _t(elem.find("uuid")),
        "bus_id": bus, "driver": driver, "cuda": cuda, "memory_total": _first(fb, "total"),
        "ecc_mode": _first(elem, "ecc_mode/current_ecc"), "mig_mode": _first(elem, "mig_mode/current_mig"),
        "driver_model": _first(elem, "driver_model/current_dm"),
    }
    details = _to_dict(elem)
    gpu.details = details if isinstance(details, dict) else {}  # an element without children reads as its text
    _samples(gpu, elem, fb)
    _memory_errors(gpu, elem)
    reasons = elem.find("clocks_event_reasons")
    if reasons is None:
        reasons = elem.find("clocks_throttle_reasons")
    if reasons is not None:
        gpu.reasons = {norm(re.sub(r"^clocks_(event|throttle)_reason_", "", c.tag)): _t(c) for c in reasons}
    gpu.processes = _processes(elem.find("processes"))
    gpu.mig_devices = _mig(elem.find("mig_devices"))
    for mig in gpu.mig_devices:  # a MIG instance's SRAM errors are the GPU's errors
        gpu.ecc.update({f"mig {mig['device']}/{k}": v for k, v in mig["ecc"].items()})
    return gpu


def _samples(gpu: GpuReport, elem: ET.Element, fb: ET.Element | None) -> None:
    gpu.sample("mem.used", _first(fb, "used"), "MiB")
    gpu.sample("mem.total", _first(fb, "total"), "MiB")
    gpu.sample("gpu.util", _first(elem, "utilization/gpu_util"), "%")
    gpu.sample("mem.util", _first(elem, "utilization/memory_util"), "%")
    gpu.sample("temp", _first(elem, "temperature/gpu_temp"), "C")
    gpu.sample("temp.mem", _first(elem, "temperature/memory_temp"), "C")
    power = elem.find("gpu_power_readings")
    if power is None:
        power = elem.find("power_readings")
    gpu.sample("power", _first(power, "average_power_draw", "power_draw", "instant_power_draw"), "W")
    gpu.sample("power.limit", _deep(power, "current_power_limit", "enforced_power_limit", "power_limit"), "W")
    gpu.sample("clock.sm", _first(elem, "clocks/sm_clock"), "MHz")
    gpu.sample("clock.mem", _first(elem, "clocks/mem_clock"), "MHz")


def _memory_errors(gpu: GpuReport, elem: ET.Element) -> None:
    ecc = elem.find("ecc_errors")
    gpu.ecc = _leaves(ecc)
    if ecc is not None:
        gpu.repair = {c.tag: _t(c) for c in ecc.iter()
                      if any(w in norm(c.tag) for w in ("repairpending", "unrepairable"))}
    retired = elem.find("retired_pages")
    gpu.retired = {k: v for k, v in _leaves(retired).items() if k.endswith("retired_count")}
    gpu.retired_pending = any(_first(retired, p) == "Yes" for p in ("pending_blacklist", "pending_retirement"))
    remap = elem.find("remapped_rows")  # "N/A" as text on MIG-mode and pre-Ampere GPUs
    gpu.remap = {k: v for k, v in _leaves(remap).items() if "histogram" not in k}
    gpu.remap_details = {c.tag: _t(c) for c in remap if not len(c)} if remap is not None else {}
    gpu.remap_failure = _first(remap, "remapped_row_failure") == "Yes"
    gpu.remap_pending = _first(remap, "remapped_row_pending") == "Yes"


def _processes(elem: ET.Element | None) -> list[dict]:
    procs = []
    for info in elem.iter("process_info") if elem is not None else ():
        pid = clamp_int(_t(info.find("pid")))
        if pid < 0:
            continue
        used = number(_t(info.find("used_memory")))
        procs.append({"pid": pid, "type": _t(info.find("type")), "name": _t(info.find("process_name")),
                      "used_bytes": used[0] * MIB if used else None})
    return procs


def _mig(elem: ET.Element | None) -> list[dict]:
    devices = []
    for dev in elem.iter("mig_device") if elem is not None else ():
        total, used = number(_first(dev, "fb_memory_usage/total")), number(_first(dev, "fb_memory_usage/used"))
        devices.append({"device": _t(dev.find("index")), "gpu_instance": _t(dev.find("gpu_instance_id")),
                        "compute_instance": _t(dev.find("compute_instance_id")),
                        "memory_total": total[0] * MIB if total else None,
                        "memory_used": used[0] * MIB if used else None,
                        "ecc": _leaves(dev.find("ecc_error_count"))})
    return devices
