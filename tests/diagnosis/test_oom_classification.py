"""The OOM verdict from the figures PyTorch prints (public/logs/EXPECTED.md cases, in GiB)."""
import pytest

from rules.features.oom import classify

GIB, MIB = 2**30, 2**20


def figures(**gib):
    return {k: v * GIB for k, v in gib.items()}


@pytest.mark.parametrize("name,f,cause", [
    # R 22.78, T 31.47, F 12.73, A 9.08, U 9.35: F + U < R even if the cache were returned
    ("cads", figures(tried_to_allocate=22.78, total_capacity=31.47, free=12.73, allocated_by_pytorch=9.08,
                     reserved_unallocated=9.35), "capacity"),
    # one request almost 3x the device
    ("framepack", figures(tried_to_allocate=30.29, total_capacity=10.74, free=3.69, allocated_by_pytorch=6.10,
                          reserved_unallocated=0.39), "capacity"),
    # R 1.70 fits into the 2.30 GiB cache, which is 44 % of what is reserved
    ("mgfn", figures(tried_to_allocate=1.70, total_capacity=6.00, free=0.0, allocated_by_pytorch=2.93,
                     reserved_unallocated=2.30), "fragmentation"),
    # R < U but U is 0.8 % of the pool: the device is full of live tensors
    ("pytorch_16417", {"tried_to_allocate": 22 * MIB, "total_capacity": 23.65 * GIB, "free": 11.06 * MIB,
                       "allocated_by_pytorch": 22.90 * GIB, "reserved_unallocated": 194.87 * MIB}, "capacity"),
    # a cap far below capacity with the device mostly free
    ("cap", figures(tried_to_allocate=4.47, total_capacity=139.8, free=130.7, allowed=8.39), "process_cap"),
    # a snapshot's oom action: the device had room, the process was refused
    ("snapshot_cap", figures(tried_to_allocate=4.47, free=130.7, reserved=8.2, reserved_unallocated=0.25), "process_cap"),
    ("true_fragmentation", {"tried_to_allocate": 48 * MIB, "free": 9 * MIB, "allocated_by_pytorch": 41.78 * GIB,
                            "reserved_unallocated": 97.49 * GIB}, "fragmentation"),
    ("truncated", figures(tried_to_allocate=0.4375, total_capacity=95.0), "undetermined"),
])
def test_classify(name, f, cause):
    got, reason = classify(f)
    assert got == cause, reason
    assert reason


def test_no_request_size_is_undetermined():
    assert classify({"free": 1.0})[0] == "undetermined"
