"""String tests on categorical columns run once per distinct value: memory follows the trace,
not its longest name (a 5,000-character ROCm/CUTLASS kernel name once cost rows x 5,000 x 4
bytes through `astype(str)`)."""
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from diagnosis.engine import slis
from ingest.engine.trace_frame import category_mask, distinct_text, in_values, text_values
from rules.engine.features import TraceContext

ROWS = 200_000
LONG = "void ck::kernel<" + "ck::tensor_operation::element_wise::PassThrough, " * 110 + ">"


def events(kernel_name: str, rows: int = ROWS) -> pd.DataFrame:
    """A profile: ProfilerStep annotations, and kernels of which one has `kernel_name`."""
    names = np.array(["ProfilerStep#1", "ProfilerStep#2", "aten::mm", "nvjet_gemm", kernel_name], dtype=object)
    codes = np.arange(rows) % len(names)
    kinds = np.where(codes < 2, "annotation", np.where(codes == 2, "cpu_op", "kernel"))
    return pd.DataFrame({
        "ts": np.arange(rows, dtype=np.int64) * 1000, "dur": np.full(rows, 500, dtype=np.int64),
        "kind": pd.Categorical(kinds), "name": pd.Categorical.from_codes(codes, categories=names),
    })


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_long_name_is_long():
    assert len(LONG) > 5_000


def test_category_mask_matches_a_per_row_test():
    ev = events(LONG, rows=1_000)
    expected = ev["name"].astype(str).str.startswith("ProfilerStep#").to_numpy()
    got = category_mask(ev["name"], lambda names: names.str.startswith("ProfilerStep#"))
    assert got.dtype == bool and (got == expected).all()


def test_category_mask_never_matches_a_missing_value_and_takes_plain_columns():
    col = pd.Series(pd.Categorical(["a", None, "ab"]))
    assert category_mask(col, lambda s: s.str.startswith("a")).tolist() == [True, False, True]
    plain = pd.Series(["x1", "y", "x2"], dtype=object)
    assert category_mask(plain, lambda s: s.str.startswith("x")).tolist() == [True, False, True]


@pytest.mark.parametrize("column", [
    pd.Series(pd.Categorical(["b", "a", None, "c", "b"], categories=["c", "b", "a", "unused"])),
    pd.Categorical(["b", "a", None, "c", "b"]),
    pd.Series(["b", "a", None, "c", "b"], dtype=object),
    pd.Series(["b", "a", None, "c", "b"], dtype="string[pyarrow]"),
])
def test_in_values_is_pandas_isin_as_a_numpy_mask(column):
    for wanted in (["b"], ("a", "c"), [], ["unused", "zz"]):
        got = in_values(column, wanted)
        assert isinstance(got, np.ndarray) and got.dtype == bool
        assert got.tolist() == pd.Series(column).isin(list(wanted)).tolist(), wanted


def test_text_values_and_distinct_text():
    col = pd.Series(pd.Categorical(["b", "a", "b", None], categories=["b", "a", "unused"]))
    assert text_values(col).tolist() == ["b", "a", "b", ""]
    assert sorted(distinct_text(col)) == ["a", "b"]  # categories no row uses are left out
    assert text_values(pd.Series([1, "x"], dtype=object)).tolist() == ["1", "x"]


@pytest.mark.parametrize("test", [
    lambda names: names.str.startswith("ProfilerStep#"),
    lambda names: names.str.contains("gemm|kernel", regex=True),
])
def test_category_mask_memory_does_not_grow_with_the_longest_name(test):
    short, long_ = events("ck_kernel"), events(LONG)
    short_peak = peak_bytes(lambda: category_mask(short["name"], test))
    long_peak = peak_bytes(lambda: category_mask(long_["name"], test))
    # rows x longest name x 4 bytes would be ~4 GB here; the mask itself is 200 KB
    assert long_peak < 1.2 * short_peak + 100_000
    assert long_peak < 8 * ROWS


def test_step_time_sli_memory_does_not_grow_with_the_longest_name():
    short, long_ = TraceContext(events("ck_kernel")), TraceContext(events(LONG))
    short_peak = peak_bytes(lambda: slis.step_time(short))
    long_peak = peak_bytes(lambda: slis.step_time(long_))
    assert long_peak < 1.2 * short_peak + 100_000
    obs = slis.step_time(long_)
    assert len(obs) == len(range(0, ROWS, 5)) * 2 - 1  # every ProfilerStep row but the warm-up one
