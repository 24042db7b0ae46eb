"""Big read buffers taken again once nothing refers to them, instead of new ones.

A new 8 MiB bytearray is a fresh map: the kernel zeroes and maps each of its 2,048 pages as it
is first touched, and bytearray() fills it with zeros besides. Reading a 150 MB Kineto trace
that way spent as long in the kernel as in the scanner. A buffer whose window is done with
(its events built, every view of it dropped) has its pages mapped already: reading into it
costs the copy alone.

Whether a buffer is still in use is told by its reference count: every view of it (a
memoryview, a numpy array, an Arrow buffer, a msgspec Raw) holds a reference to it, so a
buffer referred to only by this pool is free. CPython counts exactly; a buffer in doubt is
never taken, a new one is made instead.
"""
from __future__ import annotations

import sys
from typing import cast

# references to a free buffer while `take` looks at it: the pool's list, the loop's
# variable and getrefcount's own argument
_FREE_REFS = 3


class SpareBuffers:
    """Up to `keep` buffers of `capacity` bytes, handed out as writable views of the size
    asked for (from offset 0). A size over `capacity`, or every kept buffer in use, gets a
    view of a new bytearray, not kept."""

    def __init__(self, capacity: int, keep: int):
        self.capacity, self.keep = capacity, keep
        self._kept: list[bytearray] = []
        self.reused = 0  # buffers handed out again

    def take(self, size: int) -> memoryview:
        if size > self.capacity:
            return memoryview(bytearray(size))
        for buf in self._kept:
            if sys.getrefcount(buf) == _FREE_REFS:
                self.reused += 1
                return memoryview(buf)[:size]
        if len(self._kept) < self.keep:
            self._kept.append(bytearray(self.capacity))
            return memoryview(self._kept[-1])[:size]
        return memoryview(bytearray(size))

    def in_use(self) -> int:
        """How many kept buffers something still refers to (for tests)."""
        return sum(sys.getrefcount(buf) > _FREE_REFS for buf in self._kept)


def underlying(window: bytearray | memoryview) -> bytearray:
    """The bytearray a window is a view of (from its offset 0), for what memoryview lacks
    (rfind): searches on it must stop at len(window), past which lie an older window's bytes."""
    return cast(bytearray, window.obj) if isinstance(window, memoryview) else window  # a view of one kept bytearray
