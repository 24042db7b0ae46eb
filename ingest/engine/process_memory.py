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
import functools
import resource

import pyarrow as pa

_PR_SET_THP_DISABLE = 41
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1 << 20
TRIM_THRESHOLD_BYTES = 64 << 20
TOP_PAD_BYTES = 16 << 20


def settle() -> None:
    try:
        libc = _libc()
        libc.prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0)
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)  # fixed: freed big blocks go back at once
        # ... while the heap of small blocks (the parser's per-window temporaries) is kept
        # between windows: trimmed at every free it was mapped again, page by page (a third
        # of the page faults of a Kineto diagnosis, ~0.3 s of system time on 150 MB)
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
        libc.mallopt(_M_TOP_PAD, TOP_PAD_BYTES)
    except (OSError, AttributeError, TypeError):
        return
    try:
        pa.set_memory_pool(pa.system_memory_pool())
    except (NotImplementedError, pa.ArrowException):
        pass


def limit(max_bytes: int) -> None:
    """Cap what this process may allocate (RLIMIT_DATA: heap and private writable maps, which is
    where Python, numpy and Arrow buffers live) so a trace that needs more gets MemoryError and
    fails alone instead of the kernel's OOM killer taking the machine's processes. Address
    space (RLIMIT_AS) is not capped: allocators reserve far more of it than they use. 0: none."""
    if max_bytes <= 0:
        return
    _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        max_bytes = min(max_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (max_bytes, hard))


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
