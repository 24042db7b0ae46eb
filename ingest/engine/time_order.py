"""One event table in time order, without holding its biggest column twice.

Parsers emit events in file order; every later step wants them sorted by time. A plain
`take` of each column holds the old and the new copy of the biggest column (`attrs`, the raw
event args: ~60% of a Kineto trace) at once. Here a big string column is rebuilt slice by
slice, into the spill file (ingest.engine.spill) or else one preallocated buffer, and each parsed
chunk is dropped as soon as no later slice reads from it: profiler files are written roughly
in time order (a window at a time, each thread's events in order), so the old chunks go about
as fast as the new column grows.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from ingest.engine.row_copy import take_texts
from ingest.engine.row_copy import text_buffers as _buffers
from ingest.engine.spill import MIN_SPILL_BYTES, SpillFile

try:
    from ingest.engine import _gather  # the compiled row copy (ingest/engine/_gather.c)
except ImportError:  # built without a compiler: Arrow takes, three copies a row
    _gather = None  # type: ignore[assignment]  # the stub's module or, without the extension, None

BIG_COLUMN_BYTES = 16 << 20  # below this a column is copied the plain way
SLICE_ROWS = 1 << 12  # rows per slice: its copies (~1 MiB) come from reused heap pages
_INT32_MAX = 2**31 - 1


def sorted_by_time(holder: list[pa.Table]) -> pa.Table:
    """The table (taken out of `holder`, so the caller keeps no reference) sorted by ts
    (stable), each column in one chunk.

    One chunk per column even when already sorted: later row selections (pandas masks)
    take rows, and a take across many chunks is ~10x slower on strings."""
    table = holder.pop().unify_dictionaries()  # one dictionary per column: chunks concatenate as codes
    ts = table.column("ts").to_numpy()
    order = None if len(ts) < 2 or bool((ts[1:] >= ts[:-1]).all()) else np.argsort(ts, kind="stable")
    schema, columns = table.schema, table.columns
    del table, ts
    pool = pa.default_memory_pool()
    # The biggest column (the args) is copied in a thread beside the others: its row copy and
    # its writes to the spill file run without the GIL. Each thread writes a spill file of its own.
    biggest = max(range(len(columns)), key=lambda i: columns[i].nbytes, default=None)
    with SpillFile() as spill, SpillFile() as side_spill, ThreadPoolExecutor(1) as side:
        if biggest is not None:
            big = side.submit(_in_order, columns, biggest, order, pool, side_spill)
        for i in range(len(columns)):
            if i != biggest:
                columns[i] = _in_order(columns, i, order, pool, spill)
        if biggest is not None:
            columns[biggest] = big.result()
    return pa.Table.from_arrays(columns, schema=schema)


def _in_order(columns: list, i: int, order: np.ndarray | None, pool: pa.MemoryPool, spill: SpillFile) -> pa.Array:
    """Column i in time order. `columns[i]` is cleared first so that its chunks are referenced
    from here only and go as soon as they are copied. A text column of MIN_SPILL_BYTES or more
    (the args, the source locations) is written to `spill` (ingest.engine.spill)."""
    column, columns[i] = columns[i], None
    if (same := _same_in_any_order(column)) is not None:
        return same
    if pa.types.is_string(column.type) and column.null_count == 0 \
            and (size := _data_bytes(column.chunks)) <= _INT32_MAX:
        to_file = size >= MIN_SPILL_BYTES and spill.has_room(size)
        if to_file or (order is not None and column.nbytes > BIG_COLUMN_BYTES):
            chunks = column.chunks
            del column
            if order is None:  # in order already: only moved to the spill file
                order = np.arange(sum(map(len, chunks)))
            return take_strings_releasing(chunks, order, pool, spill if to_file else None)
    whole = column.combine_chunks()
    del column  # the chunks go before the sorted copy is made: at most 2x one column
    # ... really: a parsed chunk is small, from the heap, whose freed pages the allocator keeps
    # (ingest.engine.process_memory); Arrow's system pool hands them back (malloc_trim). Without this
    # and _drop's, the whole diagnosis of a 150 MB trace peaks 13-18 MiB higher (bench/README.md)
    pool.release_unused()
    if order is None:
        return whole
    return take_texts(whole, order) if pa.types.is_string(whole.type) else whole.take(pa.array(order))


def _same_in_any_order(column: pa.ChunkedArray) -> pa.Array | None:
    """A column every row of which is null or empty text (ids a format does not have), or the
    one value of its dictionary (the source, artifact and host of one parsed file), rebuilt
    without a copy or a take; None for any other column."""
    n = len(column)
    if column.null_count == n:
        return pa.nulls(n, column.type)
    if pa.types.is_string(column.type) and column.null_count == 0 and not _data_bytes(column.chunks):
        return pa.StringArray.from_buffers(n, pa.py_buffer(np.zeros(n + 1, np.int32)), pa.py_buffer(b""))
    if pa.types.is_dictionary(column.type) and column.null_count == 0 and column.num_chunks:
        dictionary = column.chunk(0).dictionary  # one dictionary: the table's were unified
        if len(dictionary) == 1:
            return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)).cast(column.type.index_type),
                                                  dictionary)
    return None


def take_strings_releasing(chunks: list[pa.Array], order: np.ndarray,
                           pool: pa.MemoryPool | None = None, spill: SpillFile | None = None) -> pa.StringArray:
    """`pa.chunked_array(chunks).take(order)` as one StringArray, dropping each chunk of
    `chunks` (the list is emptied) once no later slice of `order` reads it. The chunks must
    hold no nulls and at most 2 GiB of text in all (int32 offsets). With `spill`, the text is
    written there slice by slice and read back through a map (ingest.engine.spill)."""
    starts = np.cumsum([0] + [len(c) for c in chunks])
    chunk_of = np.searchsorted(starts, order, side="right") - 1
    last_use = _last_use(chunk_of, len(chunks))
    out_offsets = np.empty(len(order) + 1, dtype=np.int32)
    out_offsets[0] = written = 0
    buffers = [_buffers(c) for c in chunks]
    if spill is None:
        out_data = np.empty(_data_bytes(chunks), dtype=np.uint8)  # pages are touched as they fill
    else:
        lengths = np.concatenate([np.diff(offsets) for offsets, _ in buffers])
        region = spill.writer()
    sources = buffers if _gather is not None else None
    del buffers
    for k, lo in enumerate(range(0, len(order), SLICE_ROWS)):
        rows, used = order[lo:lo + SLICE_ROWS], chunk_of[lo:lo + SLICE_ROWS]
        within = rows - starts[used]  # row within its chunk
        ends = out_offsets[lo + 1:lo + 1 + len(rows)]
        # written straight to its place, or to a slice of its own that goes to the spill file
        target, at = (out_data, written) if spill is None else (np.empty(int(lengths[rows].sum()), np.uint8), 0)
        if sources is not None:  # each row copied once
            end = _gather.take_strings(target, ends, at, sources, used, within)
        else:
            end = _copy_with_takes(chunks, used, within, target, ends, at)
        if spill is None:
            written = end
        else:
            region.write(target)
            ends += written
            written += end
        _drop(chunks, sources, last_use == k, pool)
    chunks.clear()
    data = pa.py_buffer(out_data) if spill is None else region.mapped()
    return pa.StringArray.from_buffers(len(order), pa.py_buffer(out_offsets), data)


def _copy_with_takes(chunks: list, used: np.ndarray, within: np.ndarray, out_data: np.ndarray,
                     ends: np.ndarray, written: int) -> int:
    """One slice's rows (row `within[i]` of chunk `used[i]`) appended to `out_data` with
    Arrow's takes, their ends into `ends`; returns the bytes written so far."""
    needed, at = np.unique(used, return_inverse=True)
    by_chunk = np.argsort(at, kind="stable")  # the slice's rows grouped by chunk, in slice order
    parts = [chunks[j].take(pa.array(within[by_chunk[a:b]]))
             for j, a, b in zip(needed.tolist(), *_group_bounds(at[by_chunk], len(needed)))]
    # taken chunk by chunk (a take over a chunked array concatenates the chunks first), then
    # put back in slice order; a slice's copies stay small enough to reuse the same heap pages
    inverse = np.empty_like(by_chunk)
    inverse[by_chunk] = np.arange(len(by_chunk))
    part = (pa.concat_arrays(parts) if len(parts) > 1 else parts[0]).take(pa.array(inverse))
    del parts
    offsets, data = _buffers(part)
    size = int(offsets[-1] - offsets[0])
    out_data[written:written + size] = data[offsets[0]:offsets[-1]]
    ends[:] = offsets[1:] - offsets[0] + written
    return written + size


def _drop(chunks: list, sources: list | None, done: np.ndarray, pool: pa.MemoryPool | None) -> None:
    """The chunks no later slice reads, let go (with their buffers' views)."""
    gone = np.flatnonzero(done).tolist()
    for j in gone:
        chunks[j] = None
        if sources is not None:
            sources[j] = None
    if gone and pool is not None:
        pool.release_unused()


def _group_bounds(sorted_groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """[start, end) of each group 0..n_groups-1 in an array sorted by group."""
    bounds = np.searchsorted(sorted_groups, np.arange(n_groups + 1))
    return bounds[:-1], bounds[1:]


def _last_use(chunk_of: np.ndarray, n_chunks: int) -> np.ndarray:
    """For each chunk, the index of the last slice that reads it (-1: none)."""
    last = np.full(n_chunks, -1, dtype=np.int64)
    if len(chunk_of):
        # only where a run of one chunk's rows ends (rows come mostly in chunk order: few runs)
        ends = np.flatnonzero(np.append(chunk_of[1:] != chunk_of[:-1], True))
        np.maximum.at(last, chunk_of[ends], ends // SLICE_ROWS)
    return last


def _data_bytes(chunks: list[pa.Array]) -> int:
    total = 0
    for c in chunks:
        offsets, _ = _buffers(c)
        total += int(offsets[-1] - offsets[0])
    return total
