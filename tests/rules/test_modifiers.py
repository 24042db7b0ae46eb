"""Every field modifier, on category, numeric, text and attrs fields."""
import pytest

from tests.rules.helpers import MS, S, count, events


@pytest.fixture(scope="module")
def frame():
    return events([
        {"ts": 1 * S, "dur": 5 * MS, "kind": "kernel", "name": "ampere_sgemm_128x64", "host": "gpu-a", "pid": 1,
         "value": 1.5, "loc": "line 10", "attrs": {"grid": [4, 1, 1], "bytes": 2048, "stream": {"id": 7}, "text": "Hello"}},
        {"ts": 2 * S, "dur": 50 * MS, "kind": "kernel", "name": "nccl:all_reduce", "host": "gpu-a", "pid": 1,
         "value": 3.0, "loc": "line 11", "attrs": {"bytes": 3 * 1024**3, "pg": "0", "stream": {"id": 9}}},
        {"ts": 3 * S, "dur": 0, "kind": "error", "name": "CUDAOutOfMemoryError", "host": "GPU-B", "pid": 2,
         "loc": "line 12", "severity": "error", "attrs": {"message": "CUDA out of memory. Tried to allocate 2.00 GiB",
                                                         "flag": True, "bytes": "512"}},
        {"ts": 4 * S, "dur": 1 * MS, "kind": "runtime", "name": "cudaMalloc", "host": "gpu-b", "pid": 2,
         "loc": "line 13", "attrs": {}},
    ])


@pytest.mark.parametrize("match, expected", [
    ("kind: kernel", 2),
    ("kind: [kernel, error]", 3),                       # a list is any-of
    ("kind|in: [runtime, error]", 2),
    ("name|contains: gemm", 1),
    ("name|contains|i: GEMM", 1),
    ("name|contains: GEMM", 0),                         # case-sensitive by default
    ("name|startswith: 'nccl:'", 1),
    ("name|endswith: Error", 1),
    ("name|re: '^(ampere|nccl).*'", 2),
    ("name|re|i: 'outofmemory'", 1),
    ("name|contains|all: [nccl, reduce]", 1),
    ("name|contains|all: [nccl, gemm]", 0),
    ("host: gpu-b", 1),
    ("host|i: gpu-b", 2),
    ("severity|exists: true", 1),
    ("severity|exists: false", 3),
    ("dur|gt: 4ms", 2),                                 # durations compare in ns
    ("dur|gte: 50ms", 1),
    ("dur|lt: 1ms", 1),
    ("dur|lte: 1ms", 2),
    ("pid: 2", 2),
    ("pid: [1, 3]", 2),
    ("value|gt: 2", 1),
    ("value|exists: false", 2),                          # NaN is "not set"
    ("ts|gte: 3s", 2),
    ("loc|endswith: '12'", 1),
    ("loc|re: 'line 1[01]'", 2),
    ("attrs.bytes|gte: 2GiB", 1),                       # sizes in bytes, numbers compare numerically
    ("attrs.bytes|gt: 1000", 2),
    ("attrs.bytes: 512", 1),                             # "512" in JSON equals 512
    ("attrs.stream.id: 9", 1),                           # nested dotted path
    ("attrs.grid.0: 4", 1),                              # list index
    ("attrs.message|contains: out of memory", 1),
    ("attrs.message|re: 'Tried to allocate [0-9.]+ GiB'", 1),
    ("attrs.text|startswith|i: hello", 1),
    ("attrs.flag: true", 1),
    ("attrs.pg|exists: true", 1),
    ("attrs.missing|exists: false", 4),
    ("attrs.pg: null", 3),                               # null means "not set"
])
def test_modifier(frame, match, expected):
    assert count(f"match:\n  sel:\n    {match}\ncondition: sel\n", frame) == expected


def test_conditions_within_a_selection_are_anded(frame):
    assert count("match:\n  sel:\n    kind: kernel\n    attrs.bytes|gt: 4096\ncondition: sel\n", frame) == 1


def test_list_of_maps_is_or(frame):
    body = """
    match:
      sel:
        - {kind: error}
        - {name: cudaMalloc, host: gpu-b}
    condition: sel
    """
    assert count(body, frame) == 2
