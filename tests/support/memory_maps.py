"""Where a buffer's bytes live in this process (/proc/self/maps, Linux): the spill file's tests."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa


def mapping_of(address: int) -> str:
    """The /proc/self/maps line of the mapping holding `address`."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if lo <= address < hi:
            return line
    raise AssertionError(f"{address:#x} is in no mapping")


def in_spill_file(array: pa.Array) -> bool:
    """Whether a text array's bytes are read from a map of an unlinked file (ingest.engine.spill)."""
    return mapping_of(array.buffers()[2].address).endswith("(deleted)")
