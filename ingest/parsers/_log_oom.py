"""The CUDA out-of-memory message of PyTorch's caching allocator, every wording since 2020.

Wordings (sizes as torch's format_size prints them: "0 bytes", "396.58 MiB", "22.78 GiB"):
* legacy (<= 2.0): "Tried to allocate R (GPU d; T total capacity; A already allocated;
  F free; Rsv reserved in total by PyTorch)"
* 2.1+: "Tried to allocate R. GPU d has a total capacity of T of which F is free.
  [Including non-PyTorch memory, this process has P memory in use. | Process N has P
  memory in use. ...] [X allowed; ] Of the allocated memory A is allocated by PyTorch,
  [with Q allocated in private pools (e.g., CUDA Graphs), ] and U is reserved by PyTorch
  but unallocated." (2.1 spells "capacty"; ROCm says "HIP out of memory")
Fields the text does not carry (a truncated excerpt) are None and listed in "missing".
"""
from __future__ import annotations

import re

_SIZE = r"(\d+(?:\.\d+)? ?(?:bytes|[KMGTP]i?B|B))"
_UNITS = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15}

OOM_MARK = re.compile(r"(?:CUDA|HIP) out of memory")
_FIELDS = {
    "tried_to_allocate": re.compile(r"Tried to allocate " + _SIZE),
    "total_capacity": re.compile(r"total capac(?:i)?ty of " + _SIZE + r"|" + _SIZE + r" total capacity"),
    "free": re.compile(r"of which " + _SIZE + r" is free|" + _SIZE + r" free\b"),
    "in_use_by_process": re.compile(r"this process has " + _SIZE + r" memory in use"),
    "allowed": re.compile(_SIZE + r" allowed;"),
    "allocated_by_pytorch": re.compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch|"
                                       + _SIZE + r" already allocated"),
    "private_pools": re.compile(r"with " + _SIZE + r" allocated in private pools"),
    "reserved_unallocated": re.compile(r"and " + _SIZE + r" is reserved by PyTorch but unallocated"),
    "reserved_total": re.compile(_SIZE + r" reserved in total by PyTorch"),
}
_DEVICE = re.compile(r"\(GPU (\d+);|\bGPU (\d+) has\b")
_OTHER_PROCESS = re.compile(r"Process (\d+) has " + _SIZE + r" memory in use")
_TRUNCATED_TOTAL = re.compile(r"total capac(?:i)?ty of (\d+(?:\.\d+)?)\s*$")


_NUMBER_UNIT = re.compile(r"(\d+(?:\.\d+)?) ?([A-Za-z]+)")


def size_bytes(text: str) -> int:
    """'396.58 MiB' -> bytes (binary units as torch prints them; KB/MB/GB decimal)."""
    m = _NUMBER_UNIT.fullmatch(text.strip())
    return int(round(float(m.group(1)) * _UNITS[m.group(2)]))


def parse_oom(message: str) -> dict | None:
    """The figures of an OOM message in bytes, or None when the text is not one."""
    if not OOM_MARK.search(message):
        return None
    text = message.strip().strip("`")
    out: dict = {}
    for key, rx in _FIELDS.items():
        m = rx.search(text)
        value = next((g for g in m.groups() if g), None) if m else None
        out[key] = size_bytes(value) if value else None
    m = _DEVICE.search(text)
    out["device"] = int(m.group(1) or m.group(2)) if m else None
    others = [{"pid": int(pid), "bytes": size_bytes(size)} for pid, size in _OTHER_PROCESS.findall(text)]
    if others:
        out["other_processes"] = others
    if out["reserved_unallocated"] is None and out["reserved_total"] is not None \
            and out["allocated_by_pytorch"] is not None:
        # legacy wording gives the reserved total; unallocated is what tensors do not hold
        out["reserved_unallocated"] = max(out["reserved_total"] - out["allocated_by_pytorch"], 0)
        out["reserved_unallocated_derived"] = True
    if out["reserved_total"] is None and out["allocated_by_pytorch"] is not None \
            and out["reserved_unallocated"] is not None:
        out["reserved_total"] = out["allocated_by_pytorch"] + out["reserved_unallocated"]
    m = _TRUNCATED_TOTAL.search(text)
    if m and out["total_capacity"] is None:
        out["total_capacity_text"] = m.group(1)  # the excerpt stops before the unit
    total = out["total_capacity"]
    # seen in the wild (driver system-memory fallback, or bad counters): flag, don't "fix"
    out["counters_exceed_capacity"] = bool(total) and any(
        (out[k] or 0) > total for k in ("allocated_by_pytorch", "reserved_total", "in_use_by_process"))
    out["wording"] = "legacy" if "already allocated" in text or "total capacity;" in text else "2.1+"
    out["hint_expandable_segments"] = "expandable_segments" in text
    out["missing"] = [k for k in ("tried_to_allocate", "total_capacity", "free", "allocated_by_pytorch",
                                  "reserved_unallocated") if out[k] is None]
    return out
