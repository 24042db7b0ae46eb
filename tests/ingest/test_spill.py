"""Big text columns written to an unlinked file and read back through a map (ingest.engine.spill):
the same values, the bytes outside the process's own memory, nothing left on disk, and memory
as before wherever no file can be written."""
import sys
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest

from ingest.engine import spill as spill_mod
from ingest.engine.spill import SpillFile, spilled
from tests.support.memory_maps import mapping_of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")


def texts(n: int, seed: int = 0) -> pa.Array:
    rng = np.random.default_rng(seed)
    return pa.array([f'{{"i": {i}, "pad": "{"x" * int(rng.integers(0, 400))}"}}' for i in range(n)], pa.string())


def test_a_spilled_column_reads_the_same_from_a_file_nobody_can_find(tmp_path):
    array = texts(20_000)
    with SpillFile(str(tmp_path)) as spill:
        out = spilled(array, spill)
    assert out.equals(array) and out.type == array.type
    data = out.buffers()[2]
    assert data.address != array.buffers()[2].address
    line = mapping_of(data.address)
    assert line.endswith("(deleted)") and line.split()[1].startswith("r-"), line  # a read-only map of an unlinked file
    assert list(tmp_path.iterdir()) == []
    assert out.take(pa.array([19_999, 0])).to_pylist() == [array[19_999].as_py(), array[0].as_py()]


def test_slices_and_nulls_keep_their_rows(tmp_path):
    array = pa.array([None if i % 7 == 0 else "y" * (i % 500) for i in range(12_000)], pa.string())
    part = array.slice(1_001, 9_000)
    with SpillFile(str(tmp_path)) as spill:
        out = spilled(part, spill)
    assert out.buffers()[2].address != part.buffers()[2].address  # it did go to the file
    assert out.null_count == part.null_count and out.to_pylist() == part.to_pylist()


def test_small_texts_stay_in_memory(tmp_path):
    array = texts(100)
    with SpillFile(str(tmp_path)) as spill:
        assert spilled(array, spill) is array


def test_without_a_writable_folder_the_column_stays_in_memory(tmp_path):
    with SpillFile(str(tmp_path / "not-there")) as spill:
        assert not spill.has_room(1)
        array = texts(20_000)
        assert spilled(array, spill) is array


def test_a_full_disk_keeps_the_column_in_memory(tmp_path, monkeypatch):
    array = texts(20_000)
    with SpillFile(str(tmp_path)) as spill:
        assert spill.has_room(array.nbytes)
        monkeypatch.setattr(spill_mod.os, "fstatvfs", lambda fd: SimpleNamespace(f_bavail=0, f_frsize=4096))
        assert not spill.has_room(array.nbytes)
        assert spilled(array, spill) is array


def test_regions_written_in_pieces_map_back_whole(tmp_path):
    with SpillFile(str(tmp_path)) as spill:
        first = spill.write(b"a" * 5_000)  # not a page multiple: the next region starts on a page
        region = spill.writer()
        for piece in (b"xy" * 3_000, memoryview(np.arange(1_000, dtype=np.int32)), b""):
            region.write(piece)
        second = region.mapped()
        empty = spill.writer().mapped()
    assert first.to_pybytes() == b"a" * 5_000
    assert second.to_pybytes() == b"xy" * 3_000 + np.arange(1_000, dtype=np.int32).tobytes()
    assert empty.size == 0
