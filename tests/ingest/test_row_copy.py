"""ingest.engine.row_copy.take_texts: Arrow's take, in one exact-size copy."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ingest.engine import row_copy
from tests.fuzz.targets import replay
from tests.support.native import require_built


def _texts(rng: np.random.Generator, n: int) -> list[bytes]:
    return [bytes(rng.integers(32, 127, rng.integers(0, 40), dtype=np.uint8)) for _ in range(n)]


@pytest.mark.parametrize("arrow_type", [pa.binary(), pa.string()])
@pytest.mark.parametrize("seed", range(5))
def test_the_same_rows_as_arrows_take(arrow_type, seed):
    rng = np.random.default_rng(seed)
    values = _texts(rng, 500)
    array = pa.array(values if arrow_type == pa.binary() else [v.decode() for v in values], arrow_type)
    sliced = array.slice(37, 400)  # offsets that do not start at 0
    rows = rng.integers(0, len(sliced), 900)  # repeats, any order
    taken = row_copy.take_texts(sliced, rows)
    assert taken.type == arrow_type
    assert taken.equals(sliced.take(pa.array(rows)))
    assert row_copy.take_texts(sliced, np.array([], np.int64)).equals(sliced.take(pa.array([], pa.int64())))


def test_nulls_and_other_types_go_through_arrow():
    with_nulls = pa.array(["a", None, "ccc"])
    assert row_copy.take_texts(with_nulls, np.array([2, 1, 0])).to_pylist() == ["ccc", None, "a"]
    large = pa.array([b"x", b"yy"], pa.large_binary())
    assert row_copy.take_texts(large, np.array([1, 1])).to_pylist() == [b"yy", b"yy"]


def test_a_row_past_the_end_is_an_error_not_a_read():
    require_built(row_copy._gather, "the row copy (ingest/engine/_gather.c)")
    with pytest.raises((IndexError, ValueError)):
        row_copy.take_texts(pa.array([b"a", b"b"]), np.array([0, 2]))


def test_every_seed_of_the_fuzz_corpus_passes_the_oracle_with_the_installed_build():
    require_built(row_copy._gather, "the row copy (ingest/engine/_gather.c)")
    assert replay(row_copy._gather, "gather") >= 5


@pytest.mark.parametrize("written", [-16, 9])
def test_a_start_outside_the_output_is_an_error_not_a_write(written):
    """Issue 29's fuzz run: a negative start wrote before the output."""
    require_built(row_copy._gather, "the row copy (ingest/engine/_gather.c)")
    out, ends = np.zeros(8, np.uint8), np.zeros(1, np.int32)
    source = (np.array([0, 3], np.int32), np.frombuffer(b"abc", np.uint8))
    with pytest.raises(ValueError, match="outside the output"):
        row_copy._gather.take_strings(out, ends, written, [source], np.zeros(1, np.int64), np.zeros(1, np.int64))
    assert not out.any()
