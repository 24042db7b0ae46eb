"""What each Kineto category means in the event table, and the attrs added per kind.

Categories come from libkineto's ActivityType names (new lowercase ones, and the 2021
capitalised ones such as "Kernel" / "Runtime" / "Operator"); ROCm traces reuse the CUDA
names (hipLaunchKernel under cuda_runtime) and newer builds may say hip_*/privateuse1_*.
"""
from __future__ import annotations

import json
import re
from typing import Any

import orjson

from ingest.engine.events import INT64_MAX, INT64_MIN
from ingest.engine.parsers.kineto.decode import has_big_int

CATEGORY_KIND = {
    "kernel": "kernel", "Kernel": "kernel",
    "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
    "gpu_memset": "memset", "Memset": "memset",
    "cuda_runtime": "runtime", "Runtime": "runtime", "hip_runtime": "runtime",
    "privateuse1_runtime": "runtime", "xpu_runtime": "runtime", "mtia_runtime": "runtime",
    "cuda_driver": "driver", "Driver": "driver", "hip_driver": "driver",
    "privateuse1_driver": "driver",
    "cuda_sync": "sync",
    "cpu_op": "cpu_op", "Operator": "cpu_op", "python_function": "cpu_op",
    "user_annotation": "annotation", "gpu_user_annotation": "annotation",
    "cpu_instant_event": "marker",
    "Trace": "marker", "overhead": "marker", "Overhead": "marker",
}
# Device-side kinds: their host pid/tid come from the launching runtime call.
DEVICE_KINDS = ("kernel", "memcpy", "memset", "sync")
FLOW_PHASES = ("s", "f", "t")

NCCL_KERNEL_PREFIXES = ("ncclKernel", "ncclDevKernel")
PARAM_COMMS_OP = "record_param_comms"

# record_param_comms / NCCL kernel args -> normalized collective attrs
COLLECTIVE_KEYS = {
    "Collective name": "op", "In msg nelems": "in_nelems", "Out msg nelems": "out_nelems",
    "dtype": "dtype", "Process Group Name": "pg_name", "Process Group Description": "pg_desc",
    "Process Group Ranks": "pg_ranks", "Group size": "group_size", "Seq": "seq",
}
DTYPE_BYTES = {
    "float": 4, "float32": 4, "int": 4, "int32": 4, "half": 2, "float16": 2, "bfloat16": 2,
    "double": 8, "float64": 8, "long": 8, "int64": 8, "byte": 1, "char": 1, "bool": 1,
    "uint8": 1, "int8": 1, "short": 2, "int16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
}
_NCCL_OP = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_MEMCPY = re.compile(r"Memcpy (\w+) \((\w+) -> (\w+)\)")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load_args(raw: bytes) -> dict[str, Any]:
    """Args as a dict; integers beyond 64 bits (that orjson refuses) come back as str."""
    if not raw or raw == b"null":
        return {}
    if has_big_int(raw):  # orjson reads an integer beyond 64 bits as a float: its digits would be lost
        value = json.loads(raw)
    else:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            value = json.loads(raw, parse_int=_int_or_str)
    return value if isinstance(value, dict) else {"value": value}


def _int_or_str(text: str) -> int | str:
    v = int(text)
    return v if INT64_MIN <= v <= INT64_MAX else text


def stringify_big_ints(value: Any) -> tuple[Any, int]:
    """Integers outside int64 become strings (readers of attrs must not wrap them)."""
    if isinstance(value, bool):
        return value, 0
    if isinstance(value, int):
        return (str(value), 1) if not INT64_MIN <= value <= INT64_MAX else (value, 0)
    if isinstance(value, dict):
        n = 0
        out = {}
        for k, v in value.items():
            out[k], m = stringify_big_ints(v)
            n += m
        return out, n
    if isinstance(value, list):
        n = 0
        out_list = []
        for v in value:
            v2, m = stringify_big_ints(v)
            out_list.append(v2)
            n += m
        return out_list, n
    return value, 0


def memcpy_attrs(name: str) -> dict[str, str]:
    """'Memcpy HtoD (Pageable -> Device)' -> direction and the host memory kind."""
    m = _MEMCPY.search(name)
    if not m:
        return {}
    direction, src, dst = m.group(1), m.group(2).lower(), m.group(3).lower()
    host = src if src != "device" else dst
    return {"copy": direction, "src_kind": src, "dst_kind": dst, "memcpy_kind": host}


def step_attrs(name: str) -> dict[str, int]:
    m = _STEP.match(name)
    return {"step": int(m.group(1))} if m else {}


def collective_attrs(name: str, args: dict[str, Any], rank: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, norm in COLLECTIVE_KEYS.items():
        if key in args:
            out[norm] = args[key]
    if "op" not in out:
        m = _NCCL_OP.match(name)
        if m:
            out["op"] = m.group(1).lower()
    size = DTYPE_BYTES.get(str(out.get("dtype", "")).lower())
    nelems = out.get("in_nelems")
    if size and isinstance(nelems, int):
        out["msg_bytes"] = nelems * size
    if rank is not None:
        out["rank"] = rank
    return out

