"""Window buffers are taken again only when nothing refers to them (ingest.engine.spare_buffers)."""
import msgspec
import numpy as np
import pyarrow as pa
import pytest

from ingest.engine.spare_buffers import SpareBuffers, underlying


def test_a_buffer_nothing_refers_to_is_taken_again():
    spare = SpareBuffers(capacity=64, keep=2)
    first = spare.take(10)
    assert len(first) == 10 and isinstance(first, memoryview)
    first[:] = b"0123456789"
    buffer_id = id(underlying(first))
    del first
    again = spare.take(20)
    assert id(underlying(again)) == buffer_id and len(again) == 20 and spare.reused == 1
    assert bytes(again[:10]) == b"0123456789"  # not cleared: the reader overwrites what it uses


def _views(window):
    """What the parser keeps of a window while its rows are built."""
    return {
        "memoryview slice": lambda: window[2:8],
        "numpy array": lambda: np.frombuffer(window, np.uint8),
        "Arrow buffer": lambda: pa.py_buffer(window[:4]),
        "msgspec Raw": lambda: msgspec.json.decode(window[:13], type=list[msgspec.Raw])[0],
    }


@pytest.mark.parametrize("kind", list(_views(memoryview(bytearray(16)))))
def test_a_buffer_still_viewed_is_never_handed_out_again(kind):
    spare = SpareBuffers(capacity=64, keep=2)
    window = spare.take(32)
    window[:13] = b'[{"a": 1}, 2]'
    view = _views(window)[kind]()
    before = bytes(memoryview(view).cast("B")) if kind != "msgspec Raw" else bytes(view)
    del window
    other = spare.take(32)
    other[:] = b"x" * 32  # written over: must not reach the view
    after = bytes(memoryview(view).cast("B")) if kind != "msgspec Raw" else bytes(view)
    assert after == before
    assert spare.in_use() == 2


def test_over_capacity_or_every_buffer_in_use_a_new_bytearray_is_made():
    spare = SpareBuffers(capacity=64, keep=1)
    big = spare.take(65)
    assert len(big) == 65 and spare.in_use() == 0  # not kept
    held = spare.take(8)
    extra = spare.take(8)
    assert underlying(extra) is not underlying(held) and len(underlying(extra)) == 8 and spare.in_use() == 1
    del held
    assert spare.in_use() == 0


def test_underlying_of_a_bytearray_is_itself():
    b = bytearray(b"abc")
    assert underlying(b) is b
    assert underlying(memoryview(b)[:2]) is b
