"""Rows of a text column (binary or string, int32 offsets) copied in one pass.

Arrow's take on such an array grows its output as it goes: each growth is a new allocation,
a copy of what was written and, past the allocator's mmap threshold, every page faulted
again (a Kineto window's args, 5 MiB: 5 ms; here 0.8 ms). The compiled copy
(ingest/engine/_gather.c) writes each row once into a buffer of the exact size.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

try:
    from ingest.engine import _gather  # the compiled row copy (ingest/engine/_gather.c)
except ImportError:  # built without a compiler: Arrow's take
    _gather = None  # type: ignore[assignment]  # the stub's module or, without the extension, None


def take_texts(array: pa.Array, rows: np.ndarray) -> pa.Array:
    """`array.take(rows)` for a binary or string array."""
    if _gather is None or array.null_count or not (pa.types.is_binary(array.type) or pa.types.is_string(array.type)):
        return array.take(pa.array(rows))
    offsets, data = text_buffers(array)
    rows = np.ascontiguousarray(rows, np.int64)
    total = int((offsets[1:][rows] - offsets[:-1][rows]).sum()) if len(rows) else 0
    if total > np.iinfo(np.int32).max:
        return array.take(pa.array(rows))
    out = np.empty(total, np.uint8)
    ends = np.zeros(len(rows) + 1, np.int32)
    _gather.take_strings(out, ends[1:], 0, [(offsets, data)], np.zeros(len(rows), np.int64), rows)
    return pa.Array.from_buffers(array.type, len(rows), [None, pa.py_buffer(ends), pa.py_buffer(out)])


def text_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary or string array's int32 offsets (its own rows: the slice's offset applied)
    and the data they point into."""
    _, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int32, count=len(array) + 1, offset=array.offset * 4)
    return offsets, (np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8))
