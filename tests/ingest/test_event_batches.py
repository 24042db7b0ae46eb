"""make_batch: whole columns of one value (the fast path) equal the general path's."""
import numpy as np
import pyarrow as pa
import pytest

from ingest.engine.events import DEFAULTS, SCHEMA, make_batch


def _general(columns: dict, n: int, **constants) -> pa.RecordBatch:
    """What make_batch built before its constant columns: lists of n values through pa.array."""
    arrays = []
    for f in SCHEMA:
        data = columns.get(f.name, [constants.get(f.name, DEFAULTS[f.name])] * n)
        if pa.types.is_dictionary(f.type):
            arr = data if isinstance(data, pa.Array) else pa.array(data, type=pa.string())
            arrays.append(arr.cast(pa.string()).dictionary_encode().cast(f.type))
        else:
            arrays.append(pa.array(data, type=f.type, from_pandas=True))
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


@pytest.mark.parametrize("n", [0, 1, 7])
def test_constant_columns_equal_the_general_path(n):
    columns = {"ts": np.arange(n), "kind": ["kernel"] * n, "value": np.full(n, np.nan)}
    got = make_batch(columns, artifact="a.json", source="kineto")
    want = _general(columns, n, artifact="a.json", source="kineto")
    assert got.schema == want.schema
    for name in SCHEMA.names:
        assert got.column(name).equals(want.column(name)), name
        if pa.types.is_dictionary(SCHEMA.field(name).type):
            assert got.column(name).dictionary.equals(want.column(name).dictionary), name
    assert got.column("value").null_count == n  # NaN is a null, as from_pandas made it
