"""One GPU as `nvidia-smi -q` (text) or `nvidia-smi -q -x` (XML) describes it, and the events
it becomes. Both parsers fill a `GpuReport` and hand it to `emit_gpu`, so the hardware rules
see the same rows whichever of the two a person uploaded.

nvidia-smi prints whatever the driver knows: "N/A", "[N/A]", "[Not Supported]",
"Requested functionality has been deprecated", "Unknown Error", "Not available in WDDM driver
model" and friends all mean "no value" here, never an error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ingest.engine.events import EventSink, clamp_int
from ingest.engine.parsers.telemetry import ThrottleTracker

MIB = 2**20
# "79.67 W", "143771 MiB", "42 C", "0 %", "3201 MHz"; anything else is not a number
_NUMBER = re.compile(r"^(?P<num>[-+]?\d{1,20}(?:\.\d{1,12})?)\s*(?P<unit>[A-Za-z%]{0,8})$")
UNIT_BYTES = {"MiB": MIB, "KiB": 2**10, "GiB": 2**30, "B": 1, "MB": MIB}

# clock event ("throttle") reasons as nvidia-smi names them -> NVML bit; text and XML spellings
REASON_BITS = {
    "idle": 0x1, "gpuidle": 0x1, "applicationsclockssetting": 0x2, "swpowercap": 0x4,
    "hwslowdown": 0x8, "syncboost": 0x10, "swthermalslowdown": 0x20, "hwthermalslowdown": 0x40,
    "hwpowerbrakeslowdown": 0x80, "displayclocksetting": 0x100, "displayclockssetting": 0x100,
}


def device_index(text: object, default: int = -1) -> int:
    """A GPU index for the int32 `device` column; `default` for anything else."""
    value = clamp_int(text, default)
    return value if -1 <= value < 2**31 else default


def number(text: object) -> tuple[float, str] | None:
    """(value, unit) of "79.67 W"; None for N/A, [Not Supported], words, hex, ..."""
    if not isinstance(text, str):
        return None
    m = _NUMBER.match(text.strip())
    return (float(m["num"]), m["unit"]) if m else None


def norm(key: str) -> str:
    """Key spelling differences across driver versions: case, spaces, underscores, dots."""
    return re.sub(r"[^a-z0-9]", "", key.lower())


def is_yes(text: object) -> bool:
    return isinstance(text, str) and text.strip().lower() in ("yes", "true", "active")


@dataclass
class GpuReport:
    """What one snapshot says about one GPU; every field may be empty."""
    index: int
    loc: str
    inventory: dict = field(default_factory=dict)   # name, uuid, bus_id, driver, cuda, ...
    details: dict = field(default_factory=dict)     # the whole section tree, for attrs
    samples: list = field(default_factory=list)     # (metric, unit, value)
    ecc: dict = field(default_factory=dict)         # counter path -> count (numeric only)
    retired: dict = field(default_factory=dict)     # retired page counters
    retired_pending: bool = False
    remap: dict = field(default_factory=dict)       # row-remap counter path -> count
    remap_failure: bool = False
    remap_pending: bool = False
    remap_details: dict = field(default_factory=dict)
    repair: dict = field(default_factory=dict)      # Blackwell+: "Unrepairable Memory" ... -> "Yes"
    reasons: dict = field(default_factory=dict)     # normalized reason -> "Active"/"Not Active"
    processes: list = field(default_factory=list)   # {pid, type, name, used_bytes}
    mig_devices: list = field(default_factory=list)

    def sample(self, name: str, text: object, unit: str) -> None:
        """Add a gauge when `text` holds a number; memory is converted to bytes."""
        parsed = number(text)
        if parsed is None:
            return
        value, given = parsed
        scale = UNIT_BYTES.get(given or unit)
        if scale:
            value, unit = value * scale, "bytes"
        self.samples.append((name, unit, value))


def throttle_mask(reasons: dict) -> int | None:
    """NVML mask of the active reasons; None when the capture shows none of them."""
    known = {k: v for k, v in reasons.items() if k in REASON_BITS and isinstance(v, str)}
    if not any(v.strip() in ("Active", "Not Active") for v in known.values()):
        return None
    mask = 0
    for key, value in known.items():
        if value.strip() == "Active":
            mask |= REASON_BITS[key]
    return mask


def split_ecc(counters: dict) -> tuple[dict, dict]:
    """(uncorrectable, correctable) counters > 0, by their path ("Volatile/DRAM Uncorrectable",
    "volatile/double_bit/total", "Aggregate Uncorrectable SRAM Sources/SRAM L2" ...)."""
    unc, corr = {}, {}
    for path, value in counters.items():
        words = path.lower().replace("_", " ")
        if value <= 0:
            continue
        if "uncorrectable" in words or "double bit" in words or "uncorr" in words:
            unc[path] = value
        elif "correctable" in words or "single bit" in words:
            corr[path] = value
    return unc, corr


def emit_gpu(sink: EventSink, ts: int, throttle: ThrottleTracker, gpu: GpuReport) -> None:
    device, loc = gpu.index, gpu.loc
    attrs = {**gpu.inventory, "ecc_errors": gpu.ecc, "retired_pages": gpu.retired,
             "remapped_rows": gpu.remap_details, "mig_devices": gpu.mig_devices, "details": gpu.details}
    sink.emit(ts=ts, kind="marker", name="GpuInventory", device=device, loc=loc, attrs=attrs)
    for name, unit, value in gpu.samples:
        sink.emit(ts=ts, kind="sample", name=name, unit=unit, value=value, device=device, loc=loc)
    for proc in gpu.processes:
        if proc.get("used_bytes") is not None:
            sink.emit(ts=ts, kind="sample", name="proc.mem.used", unit="bytes", value=proc["used_bytes"],
                      device=device, pid=proc["pid"], loc=loc,
                      attrs={"process": proc.get("name", ""), "type": proc.get("type", "")})
    mask = throttle_mask(gpu.reasons)
    if mask is not None:
        throttle.update(ts, device, mask, loc)
    _emit_errors(sink, ts, gpu)


def _emit_errors(sink: EventSink, ts: int, gpu: GpuReport) -> None:
    """ECC counters, retired pages and row remapping that show damaged memory."""
    device, loc = gpu.index, gpu.loc
    unc, corr = split_ecc(gpu.ecc)
    retired = {k: v for k, v in gpu.retired.items() if v > 0}
    remap_unc = {k: v for k, v in gpu.remap.items() if v > 0 and "unc" in norm(k) and "inactive" not in norm(k)}
    for name, severity, found in (("EccUncorrectable", "critical", unc), ("EccCorrectable", "warning", corr),
                                  ("RetiredPages", "error", retired),
                                  ("RowRemapUncorrectable", "error", remap_unc)):
        if found:
            sink.emit(ts=ts, kind="error", name=name, device=device, value=max(found.values()),
                      severity=severity, loc=loc, attrs={"counters": found})
    if gpu.retired_pending:
        sink.emit(ts=ts, kind="error", name="RetiredPagesPending", device=device, severity="error", loc=loc)
    unrepairable = {k: v for k, v in gpu.repair.items() if "unrepairable" in norm(k) and is_yes(v)}
    if gpu.remap_failure or unrepairable:
        sink.emit(ts=ts, kind="error", name="RowRemapFailure", device=device, severity="critical", loc=loc,
                  attrs={"remapped_rows": gpu.remap_details, **({"repair": unrepairable} if unrepairable else {})})
    pending = {k: v for k, v in gpu.repair.items() if "pending" in norm(k) and is_yes(v)}
    if gpu.remap_pending or pending:
        sink.emit(ts=ts, kind="error", name="RowRemapPending", device=device, severity="warning", loc=loc,
                  attrs={"text": "a row remap or memory repair is pending: reset the GPU to apply it",
                         **({"repair": pending} if pending else {})})
