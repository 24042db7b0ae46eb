"""Memory settings for a process that parses and diagnoses big traces (the CLI, a worker).

What it holds at its peak must be what the trace needs, not what the allocators kept:

* Transparent huge pages off. Arrow's allocator and numpy ask for huge pages for large
  buffers; where the kernel compacts memory to find them (`defrag` = madvise, a common
  default) a busy host stalls each first touch: sorting the 90 MB attrs column of a 150 MB
  trace cost 1.3-2 s of system time for 0.05 s of work. A diagnosis lives seconds and
  touches each buffer a few times: small pages cost it nothing measurable.
* Arrow on the system allocator, with large blocks always mapped. mimalloc (Arrow's
  default) and glibc's adaptive mmap threshold both keep freed pages of the parsed chunks,
  so sorting the table to time order held the old and the new copy of each column: a 1 GB
  Kineto trace peaked at 2.1 GB with them and at 1.5 GB without (bench/README.md).

Linux only; elsewhere nothing changes. Call it once, early, before the big allocations.
"""
from __future__ import annotations

import ctypes

import pyarrow as pa

_PR_SET_THP_DISABLE = 41
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20


def settle() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)  # fixed: freed big blocks go back at once
    except (OSError, AttributeError, TypeError):
        return
    try:
        pa.set_memory_pool(pa.system_memory_pool())
    except (NotImplementedError, pa.ArrowException):
        pass
