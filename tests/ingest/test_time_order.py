"""The event table in time order: the same rows as a plain sort, with the parsed chunks of a
big string column dropped as the sorted copy grows (not all kept to the end)."""
import numpy as np
import pyarrow as pa
import pytest

from ingest.engine import time_order
from ingest.engine.events import SCHEMA
from tests.support.memory_maps import in_spill_file
from tests.support.native import require_built


def _table(chunks: int, rows: int, rng: np.random.Generator) -> pa.Table:
    """Rows roughly in time order across chunks (as profilers write them), shuffled inside."""
    batches = []
    for k in range(chunks):
        ts = k * 1_000_000 + rng.permutation(rows)
        attrs = [f'{{"i": {k * rows + i}, "pad": "{"x" * int(rng.integers(0, 300))}"}}' for i in range(rows)]
        cols = {f.name: pa.nulls(rows, f.type) for f in SCHEMA}
        cols["ts"] = pa.array(ts, pa.int64())
        cols["attrs"] = pa.array(attrs, pa.string())
        cols["kind"] = pa.array(["kernel"] * rows).dictionary_encode()
        cols["span_id"] = pa.array([""] * rows, pa.string())  # a format without span ids writes ""
        batches.append(pa.record_batch([cols[f.name].cast(f.type) for f in SCHEMA], schema=SCHEMA))
    return pa.Table.from_batches(batches)


@pytest.fixture(params=["compiled", "arrow"])
def row_copy(request, monkeypatch):
    """The sort's row copy: the compiled one (ingest/engine/_gather.c) and Arrow's takes."""
    if request.param == "arrow":
        monkeypatch.setattr(time_order, "_gather", None)
    else:
        require_built(time_order._gather, "the row copy (ingest/engine/_gather.c)")
    return request.param


@pytest.mark.parametrize("slice_rows", [7, 1 << 16])
def test_same_rows_as_a_plain_stable_sort(monkeypatch, slice_rows, row_copy):
    monkeypatch.setattr(time_order, "BIG_COLUMN_BYTES", 0)  # every string column the slice way
    monkeypatch.setattr(time_order, "SLICE_ROWS", slice_rows)
    table = _table(chunks=5, rows=400, rng=np.random.default_rng(1))
    order = np.argsort(table.column("ts").to_numpy(), kind="stable")
    want = {c: table.column(c).combine_chunks().take(pa.array(order)) for c in table.column_names}
    got = time_order.sorted_by_time([table])
    for c, column in want.items():
        assert got.column(c).num_chunks == 1
        assert got.column(c).chunk(0).equals(column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column)


def test_chunks_go_as_soon_as_no_later_slice_reads_them(monkeypatch, row_copy):
    monkeypatch.setattr(time_order, "SLICE_ROWS", 400)
    table = _table(chunks=6, rows=400, rng=np.random.default_rng(2))
    chunks = table.column("attrs").chunks
    order = np.argsort(table.column("ts").to_numpy(), kind="stable")
    del table
    held = []  # Arrow memory alive after each slice is copied: the parsed chunks left, mostly
    real_drop = time_order._drop

    def recording(*args):
        real_drop(*args)
        held.append(pa.total_allocated_bytes())
    monkeypatch.setattr(time_order, "_drop", recording)
    out = time_order.take_strings_releasing(chunks, order)
    assert len(out) == len(order) and chunks == []
    # rows are in chunk order here, so slice k reads chunk k only: the earlier ones are gone
    assert len(held) == 6 and all(b < a for a, b in zip(held, held[1:])), held
    assert held[-1] < held[0] / 2


@pytest.mark.parametrize("chunk_of,within,why", [
    ([1], [0], "dropped or missing"), ([5], [0], "dropped or missing"), ([0], [3], "past its chunk"),
    ([0], [-1], "past its chunk"), ([0], [2**63 - 1], "past its chunk")])
def test_the_compiled_copy_refuses_rows_outside_its_sources(chunk_of, within, why):
    require_built(time_order._gather, "the row copy (ingest/engine/_gather.c)")
    offsets, data = np.array([0, 2, 5], np.int32), np.frombuffer(b"abcde", np.uint8)
    out, ends = np.zeros(8, np.uint8), np.zeros(1, np.int32)
    with pytest.raises(ValueError, match=why):
        time_order._gather.take_strings(out, ends, 0, [(offsets, data), None], np.array(chunk_of, np.int64),
                                        np.array(within, np.int64))
    assert time_order._gather.take_strings(out, ends, 0, [(offsets, data)], np.array([0], np.int64),
                                           np.array([1], np.int64)) == 3
    assert bytes(out[:3]) == b"cde" and ends[0] == 3


def test_columns_with_nulls_or_small_take_the_plain_way():
    table = _table(chunks=2, rows=50, rng=np.random.default_rng(3))
    got = time_order.sorted_by_time([table])
    assert got.column("trace_id").null_count == 100
    assert (np.diff(got.column("ts").to_numpy()) >= 0).all()


@pytest.mark.parametrize("folder", ["writable", "missing"])
def test_a_big_text_column_is_sorted_into_the_spill_file_or_kept_in_memory(tmp_path, monkeypatch, folder, row_copy):
    """Where no file can be written the sort still gives the same rows, in memory."""
    monkeypatch.setattr(time_order, "BIG_COLUMN_BYTES", 0)
    monkeypatch.setattr(time_order, "MIN_SPILL_BYTES", 0)
    monkeypatch.setenv("TRACEDOC_SPILL_DIR", str(tmp_path if folder == "writable" else tmp_path / "missing"))
    table = _table(chunks=4, rows=300, rng=np.random.default_rng(4))
    want = table.column("attrs").take(pa.array(np.argsort(table.column("ts").to_numpy(), kind="stable")))
    got = time_order.sorted_by_time([table]).column("attrs").chunk(0)
    assert got.equals(want.combine_chunks())
    in_file = in_spill_file(got)
    assert in_file == (folder == "writable")
    assert list(tmp_path.iterdir()) == []


def test_a_big_text_column_already_in_order_still_goes_to_the_spill_file(tmp_path, monkeypatch):
    monkeypatch.setattr(time_order, "MIN_SPILL_BYTES", 0)
    monkeypatch.setenv("TRACEDOC_SPILL_DIR", str(tmp_path))
    table = time_order.sorted_by_time([_table(chunks=3, rows=200, rng=np.random.default_rng(5))])
    again = time_order.sorted_by_time([table])
    assert again.column("attrs").chunk(0).equals(table.column("attrs").chunk(0))
    assert in_spill_file(again.column("attrs").chunk(0))
