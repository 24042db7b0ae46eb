"""Host time inside GPU idle gaps: the interval join gives what a loop over the gaps gives; the
DataLoader's share of the gaps; the launch calls counted against the kernels."""
import json

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import as_event_frame
from rules.engine.features import TraceContext
from rules.engine.features.gpu import _host_time_in


def test_host_time_in_gaps_matches_a_loop_over_gaps():
    rng = np.random.default_rng(3)
    n = 4000
    ts = rng.integers(0, 1_000_000_000, n)
    dur = rng.integers(0, 60_000_000, n)            # some ops span several gaps, some none
    kinds = rng.choice(["cpu_op", "runtime", "kernel", "sync"], n)
    names = rng.choice(["a", "b", "c", "d"], n)
    ev = as_event_frame(pd.DataFrame({"ts": ts, "dur": dur, "kind": kinds, "name": names}))
    starts = np.arange(0, 1_000_000_000, 40_000_000)
    bounds = np.column_stack([starts + 5_000_000, starts + 5_000_000 + rng.integers(1_000_000, 30_000_000, len(starts))])
    want: dict[str, int] = {}
    host = np.isin(kinds, ["cpu_op", "runtime", "annotation", "sync"]) & (dur > 0)
    for lo, hi in bounds:
        inside = host & (ts < hi) & (ts + dur > lo)
        for name, s, e in zip(names[inside], ts[inside], (ts + dur)[inside]):
            want[name] = want.get(name, 0) + int(min(e, hi) - max(s, lo))
    assert _host_time_in(TraceContext(ev), bounds) == want


def _union_inside(intervals: list[tuple[int, int]], bounds: np.ndarray) -> int:
    """Reference: the nanoseconds of the gaps covered by any interval (one bit per ns)."""
    covered = np.zeros(int(bounds.max()) + 1, bool)
    for s, e in intervals:
        covered[s:e] = True
    return int(sum(covered[lo:hi].sum() for lo, hi in bounds))


def test_input_time_counts_nested_dataloader_frames_once():
    """The frames of one DataLoader step (as PyTorch's profiler writes them with Python
    tracing: the annotation, __next__, _next_data, fetch, collate) overlap: their union, not
    their sum, is the time in the input pipeline. A transformers pipeline's `__next__` wraps the
    whole forward pass and is not input loading; a GPU user annotation (a stream) is no host work."""
    from rules.engine.features.gpu import _input_time_in
    rng = np.random.default_rng(7)
    rows, inputs = [], []
    for step in range(20):
        start = step * 10_000 + int(rng.integers(0, 2_000))
        length = int(rng.integers(500, 6_000))
        inputs.append((start, start + length))
        rows += [("annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", start, length, -1),
                 ("cpu_op", "torch/utils/data/dataloader.py(728): __next__", start + 5, length - 10, -1),
                 ("cpu_op", "torch/utils/data/dataloader.py(787): _next_data", start + 10, length - 20, -1),
                 ("cpu_op", "torch/utils/data/_utils/fetch.py(25): fetch", start + 15, length - 30, -1),
                 ("cpu_op", "torch/utils/data/_utils/collate.py(317): default_collate", start + 20, 50, -1),
                 ("cpu_op", "transformers/pipelines/pt_utils.py(117): __next__", step * 10_000, 9_000, -1),
                 ("annotation", "## forward ##", step * 10_000, 9_999, 7),  # GPU-side: a stream
                 ("annotation", "DataLoader on the GPU timeline", step * 10_000, 9_999, 7)]
    kind, name, ts, dur, stream = map(list, zip(*rows))
    ev = as_event_frame(pd.DataFrame({"ts": ts, "dur": dur, "kind": kind, "name": name, "stream": stream}))
    bounds = np.column_stack([np.arange(0, 200_000, 10_000) + 1_000, np.arange(0, 200_000, 10_000) + 7_000])
    got = _input_time_in(TraceContext(ev), bounds)
    assert got == _union_inside(inputs, bounds)
    assert 0 < got <= int((bounds[:, 1] - bounds[:, 0]).sum())


def test_launch_calls_of_the_driver_and_hip_are_counted():
    """Triton kernels go through the driver (cuLaunchKernel(Ex), kind driver) on CUDA and
    through hipModuleLaunchKernel on ROCm: each kernel's launch is one launch call."""
    from rules.engine.features.gpu import gpu_activity
    calls = ["cudaLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC", "hipModuleLaunchKernel",
             "hipLaunchKernel", "cuLaunchKernel"] * 4
    rows = []
    for i, call in enumerate(calls):
        launch = 1_000_000 + i * 50_000
        rows.append(("driver" if call.startswith("cu") and not call.startswith("cuda") else "runtime",
                     call, launch, 5_000, -1))
        rows.append(("kernel", f"k{i % 3}", launch + 10_000, 8_000, 7))
    rows.append(("runtime", "cudaDeviceGetAttribute", 1_000_100, 100, -1))  # not a launch
    kind, name, ts, dur, stream = map(list, zip(*rows))
    ev = as_event_frame(pd.DataFrame({"ts": ts, "dur": dur, "kind": kind, "name": name, "stream": stream}))
    (attrs,) = gpu_activity(TraceContext(ev))["attrs"].map(json.loads)
    assert attrs["kernels"] == len(calls)
    assert attrs["launches"] == len(calls) - 1  # the window opens at the first kernel, after its launch
