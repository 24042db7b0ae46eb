"""Big text columns kept in a file the process maps, not in its own memory.

The raw event args (`attrs`) are ~60% of a Kineto trace's table and a diagnosis reads them for
a few rows only (collectives, OOM records, log lines, a finding's evidence). Written to an
unlinked temporary file and read back through a read-only memory map, the column is still a
plain Arrow string array to every reader, but its bytes are page cache the kernel can write
back and drop under memory pressure, and only the pages that are read count in the process's
resident memory (a 150 MB Kineto trace: 91 MiB of args out of the diagnosis's peak).

`TRACEDOC_SPILL_DIR` names the folder (default: the system's temporary folder; on a tmpfs the
bytes stay in memory, only no longer in this process's). The file has no name from the start:
nothing is left behind, whatever ends the process.
"""
from __future__ import annotations

import mmap
import os
import tempfile
from typing import IO

import pyarrow as pa

from ingest.engine.row_copy import text_buffers

SPILL_DIR_ENV = "TRACEDOC_SPILL_DIR"
MIN_SPILL_BYTES = 1 << 20  # smaller texts stay in memory: a map per page-rounded region is not worth it
_PAGE = mmap.ALLOCATIONGRANULARITY


class SpillFile:
    """An unlinked temporary file written in page-aligned regions, each mapped back read-only.

    A region's map lives as long as an Arrow buffer refers to it; closing the file (or the
    `with` block ending) leaves the maps readable."""

    def __init__(self, folder: str | None = None):
        self._size = 0
        self._file: IO[bytes] | None
        try:
            self._file = tempfile.TemporaryFile(dir=folder or os.environ.get(SPILL_DIR_ENV) or None)
        except OSError:  # no writable temporary folder: everything stays in memory
            self._file = None

    def __enter__(self) -> SpillFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def has_room(self, nbytes: int) -> bool:
        """Whether `nbytes` more fit in the file's folder (with as much again to spare): checked
        before a column is moved there, so that a full disk keeps it in memory instead."""
        if self._file is None:
            return False
        try:
            st = os.fstatvfs(self._file.fileno())
        except OSError:
            return False
        return st.f_bavail * st.f_frsize >= 2 * nbytes + MIN_SPILL_BYTES

    def writer(self) -> RegionWriter:
        """A new region, written piece by piece; `RegionWriter.mapped()` ends it."""
        return RegionWriter(self)

    def write(self, data) -> pa.Buffer:
        """`data` (bytes-like) as a region of its own, read back through a map."""
        region = self.writer()
        region.write(data)
        return region.mapped()

    def _map(self, start: int, length: int) -> pa.Buffer:
        if not length:
            return pa.py_buffer(b"")
        padded = -length % _PAGE
        if padded:
            os.write(self._fd(), bytes(padded))
        self._size = start + length + padded
        view = mmap.mmap(self._fd(), length, offset=start, access=mmap.ACCESS_READ)
        return pa.py_buffer(view)

    def _fd(self) -> int:
        assert self._file is not None  # regions are written after has_room(), to an open file
        return self._file.fileno()


class RegionWriter:
    """Appends to one region of a SpillFile (regions are written one at a time)."""

    def __init__(self, spill: SpillFile):
        self._spill, self._start, self.length = spill, spill._size, 0

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        fd = self._spill._fd()
        while view.nbytes:
            done = os.write(fd, view)
            self.length += done
            view = view[done:]

    def mapped(self) -> pa.Buffer:
        return self._spill._map(self._start, self.length)


def spilled(array: pa.Array, spill: SpillFile) -> pa.Array:
    """A string (or binary) array, int32 offsets, whose data bytes are read from `spill`; the
    offsets and the validity stay in memory. Arrays under MIN_SPILL_BYTES of text are returned
    as they are."""
    ends, data = text_buffers(array)
    lo, hi = int(ends[0]), int(ends[-1])
    if hi - lo < MIN_SPILL_BYTES or not spill.has_room(hi - lo):
        return array
    try:
        mapped = spill.write(data[lo:hi])
    except OSError:  # the disk filled up meanwhile: this array stays in memory
        return array
    rebased = pa.py_buffer(ends - lo) if lo else pa.py_buffer(ends)
    validity = array.buffers()[0]
    if validity is not None and array.offset:  # a slice's bitmap: rebuilt from its own rows
        validity = array.is_valid().buffers()[1]
    return pa.Array.from_buffers(array.type, len(array), [validity, rebased, mapped],
                                 null_count=array.null_count)
