"""The OOM verdict from the figures PyTorch prints (public/logs/EXPECTED.md cases, in GiB)."""
import pytest

from ingest.engine.parsers.logs.oom import parse_oom
from rules.engine.features.oom import classify

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
    # R < U though U is 0.8 % of the pool: the allocator freed its empty segments and retried, so the
    # 194.87 MiB it still caches sits in holes between live tensors and cannot serve a 22 MiB block
    # (issue 33: reserved-but-unallocated above the request is fragmentation, whatever its share)
    ("pytorch_16417", {"tried_to_allocate": 22 * MIB, "total_capacity": 23.65 * GIB, "free": 11.06 * MIB,
                       "allocated_by_pytorch": 22.90 * GIB, "reserved_unallocated": 194.87 * MIB}, "fragmentation"),
    # U a sliver below R and F + U short of R with no margin: the device is full
    ("full_sliver", {"tried_to_allocate": 524 * MIB, "total_capacity": 15.77 * GIB, "free": 137.12 * MIB,
                     "allocated_by_pytorch": 13.81 * GIB, "reserved_unallocated": 121.43 * MIB}, "capacity"),
    # U < R but F + U exceeds R by far more than the rounding margin: the memory left is in pieces
    ("free_plus_cache", figures(tried_to_allocate=1.96, total_capacity=79.18, free=1.08, allocated_by_pytorch=75.31,
                                reserved_unallocated=1.83), "fragmentation"),
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


@pytest.mark.parametrize("name,f,cause", [
    # lorax #94, legacy wording with a cap: "23.77 GiB allowed" of 47.54 while 23.44 GiB was free
    ("lorax_allowed", figures(tried_to_allocate=2 / 1024, total_capacity=47.54, free=23.44, allowed=23.77,
                              allocated_by_pytorch=23.68, reserved_unallocated=0.09), "process_cap"),
    # StructureFlow #35: 8.20 GiB free for an 8.13 GiB request leaves 70 MiB: the device is full, not capped
    ("free_barely_above_request", {"tried_to_allocate": 8.13 * GIB, "total_capacity": 10.76 * GIB,
                                   "free": 8.20 * GIB, "allocated_by_pytorch": 643.57 * MIB,
                                   "reserved_unallocated": 32.43 * MIB}, "capacity"),
    # pytorch #32101: 5.81 GiB cached (19 % of the pool) for a 152 MiB request
    ("legacy_reserved_fragmentation", {"tried_to_allocate": 152 * MIB, "total_capacity": 31.72 * GIB,
                                       "free": 6.12 * MIB, "allocated_by_pytorch": 24.89 * GIB,
                                       "reserved_unallocated": 5.81 * GIB}, "fragmentation"),
])
def test_classify_more_real_cases(name, f, cause):
    got, reason = classify(f)
    assert got == cause, reason


@pytest.mark.parametrize("message,expect", [
    # torch 1.0: "cached" is the cache tensors do not use
    ("RuntimeError: CUDA out of memory. Tried to allocate 1024.00 MiB (GPU 0; 15.90 GiB total capacity; "
     "14.25 GiB already allocated; 991.56 MiB free; 607.00 KiB cached)",
     {"tried_to_allocate": 1024 * MIB, "reserved_unallocated": 607 * 1024, "wording": "legacy"}),
    ("RuntimeError: CUDA error: out of memory", {"tried_to_allocate": None, "wording": "cuda_error"}),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
     {"tried_to_allocate": None, "wording": "library_alloc"}),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.",
     {"tried_to_allocate": 4770354232, "framework": "jax/xla"}),
    ("Status: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 200.02GiB with allocator GPU_0_bfc on device 0.",
     {"tried_to_allocate": round(200.02 * GIB)}),
    ("ResourceExhaustedError: OOM when allocating tensor with shape[64,2016,9,9] and type float on "
     "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
     {"tried_to_allocate": 64 * 2016 * 9 * 9 * 4, "framework": "tensorflow"}),
])
def test_oom_wordings(message, expect):
    got = parse_oom(message)
    assert got is not None
    for key, value in expect.items():
        assert got[key] == value, key


@pytest.mark.parametrize("message", [
    # BFC's own warning before the real error; vLLM's advice at capture start
    "W bfc_allocator.cc:371] Allocator (GPU_0_bfc) ran out of memory trying to allocate 200.02GiB from the lower "
    "end with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there "
    "could be performance gains if more memory were available.",
    "If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization`",
    "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |",
])
def test_not_an_oom(message):
    assert parse_oom(message) is None


@pytest.mark.parametrize("message,expect", [
    # NCCL's own allocation (any version, with or without the CUDA error number)
    ("node:2134736:2285781 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
     {"wording": "nccl", "framework": "nccl"}),
    ("ins-x:3018451:3018451 [0] enqueue.cc:1085 NCCL WARN Cuda failure 2 'out of memory'", {"wording": "nccl"}),
    # XLA PjRt wordings: the size in parentheses, "allocating", TPU/GPU program load with free figures
    ("Execution of replica 0 failed: Resource exhausted: Failed to allocate request for 32.00MiB (33554432B) on "
     "device ordinal 0", {"tried_to_allocate": 33554432, "framework": "jax/xla"}),
    ("XlaRuntimeError: RESOURCE_EXHAUSTED: Error loading program 'jit_f': Attempting to reserve 13.50G at the bottom "
     "of memory. That was not possible. There are 7.48G free, 0B reserved, and 7.48G reservable.",
     {"tried_to_allocate": round(13.5 * GIB), "free": round(7.48 * GIB), "reservable": round(7.48 * GIB)}),
    # XLA cuda_malloc_async
    ("E1103 gpu_cudamallocasync_allocator.cc:361] gpu_async_1 cuMemAllocAsync failed to allocate 1225195446464 bytes: "
     "RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory", {"tried_to_allocate": 1225195446464}),
    # a BFC allocator's failure (no "not a failure" clause), rounded size preferred
    ("W external/tsl/tsl/framework/bfc_allocator.cc:479] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
     "6.50GiB (rounded to 6979321856)requested by op", {"tried_to_allocate": 6979321856, "wording": "bfc"}),
    # torch's cudaMallocAsync backend prints its figures on the lines after the message
    ("torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of memory)\n"
     "Currently allocated : 9.43 GiB\nRequested           : 640.00 MiB\nDevice limit        : 11.59 GiB\n"
     "Free (according to CUDA): 7.12 MiB",
     {"tried_to_allocate": 640 * MIB, "total_capacity": round(11.59 * GIB), "free": round(7.12 * MIB),
      "allocated_by_pytorch": round(9.43 * GIB), "wording": "torch_async"}),
    ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.",
     {"tried_to_allocate": 2**60}),
    ("RuntimeError: CUDA driver error: out of memory", {"wording": "cuda_error"}),
    # MXNet's pooled storage manager after releasing its pool and retrying once (a Windows build's path)
    ("mxnet.base.MXNetError: [23:54:01] c:\\jenkins\\workspace\\mxnet-tag\\mxnet\\src\\storage\\./pooled_storage_manager.h:161: "
     "cudaMalloc retry failed: out of memory", {"wording": "cuda_error", "tried_to_allocate": None}),
    ("[TRT] [E] 2: [executionContext.cpp::nvinfer1::rt::ExecutionContext] Error Code 2: OutOfMemory "
     "(no further information)", {"wording": "tensorrt"}),
])
def test_more_oom_wordings(message, expect):
    got = parse_oom(message)
    assert got is not None
    for key, value in expect.items():
        assert got[key] == value, key


@pytest.mark.parametrize("line,expect", [
    ("Limit:                 10925244416", {"limit": 10925244416}),
    ("InUse:                  7613320960", {"in_use": 7613320960}),
    ("E1103 18:23:55.103186 3413767 gpu_cudamallocasync_allocator.cc:366] Stats: Limit:      0", {"limit": 0}),
    (" Reported by CUDA: Free memory/Total memory: 22635544576/85095874560",
     {"free": 22635544576, "total_capacity": 85095874560}),
    ("node:1:2 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes", {"tried_to_allocate": 6291456}),
    ("some tool: 3 GiB", None),
    ("Requested by user: yes", None),
])
def test_allocator_fact(line, expect):
    from ingest.engine.parsers.logs.oom import allocator_fact
    assert allocator_fact(line) == expect


def test_bfc_stats_decide_capacity_and_fragmentation():
    from rules.engine.features.oom import _stats_figures
    # DeepSpeech #1940: Limit 10.17 GiB, InUse 7.09 GiB, a 3.33 GiB tensor: the pool cannot hold it
    f = _stats_figures({"limit": 10925244416, "in_use": 7613320960}) | {"tried_to_allocate": 3576881152}
    assert classify(f)[0] == "capacity"
    # the same pool with a request that fits what is not in use: BFC found no chunk
    f = _stats_figures({"limit": 10925244416, "in_use": 7613320960}) | {"tried_to_allocate": 1 * GIB}
    assert classify(f)[0] == "fragmentation"


def test_xla_reservable_and_absurd_requests():
    assert classify(figures(tried_to_allocate=13.5, free=7.48, reservable=7.48))[0] == "capacity"
    assert classify(figures(tried_to_allocate=5.0, free=7.48, reservable=2.0))[0] == "fragmentation"
    assert classify({"tried_to_allocate": 2**60})[0] == "capacity"


def test_one_failure_printed_twice_is_one_incident():
    import json

    import pandas as pd

    from rules.engine.features.oom import _incidents
    rows = [  # XLA's log line, then the exception; then an unrelated failure later
        ("line 3", "Execution of replica 0 failed: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 104857600 bytes",
         104857600),
        ("line 40", "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 104857600 bytes",
         104857600),
        ("line 90", "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 5368709120 bytes",
         5368709120),
    ]
    ooms = pd.DataFrame([{"ts": 0, "kind": "oom", "name": "OutOfMemoryError", "source": "log", "artifact": "a.log",
                          "pid": -1, "loc": loc, "value": float(r),
                          "attrs": json.dumps(parse_oom(text) | {"text": text})} for loc, text, r in rows])
    groups = _incidents(ooms, {})
    assert [len(g) for g in groups] == [2, 1]
