"""HTA-style breakdowns on small hand-made frames, where every figure can be worked out by hand."""
import json
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from diagnosis.engine.breakdowns import breakdowns, gpu_work, launch_stats, temporal_breakdown
from diagnosis.engine.pipeline import event_frame
from ingest.engine.events import make_batch

US = 1_000  # ns
GEMM, NCCL, COPY = "sm90_gemm_kernel", "ncclDevKernel_AllReduce_Sum_f32", "Memcpy HtoD (Pinned -> Device)"


def frame(rows: list[dict], artifact: str = "rank0.json") -> pd.DataFrame:
    """An event frame as the pipeline builds it (categorical names, Arrow strings)."""
    columns = {c: [r.get(c, d) for r in rows] for c, d in
               (("ts", 0), ("dur", 0), ("kind", "marker"), ("name", ""), ("device", -1), ("stream", -1),
                ("corr", -1), ("pid", -1), ("tid", -1))}
    return event_frame(pa.Table.from_batches([make_batch(columns, artifact=artifact, source="kineto")]))


def gpu(name, ts, dur, kind="kernel", stream=7, device=0, corr=-1):
    return {"ts": ts * US, "dur": dur * US, "kind": kind, "name": name, "device": device, "stream": stream,
            "corr": corr}


def launch(corr, ts, dur, name="cudaLaunchKernel"):
    return {"ts": ts * US, "dur": dur * US, "kind": "runtime", "name": name, "corr": corr, "pid": 1, "tid": 1}


def test_temporal_breakdown_counts_overlap_once_in_precedence_order():
    rows = [gpu(GEMM, 0, 100), gpu(NCCL, 50, 100, kind="collective", stream=9),
            gpu(COPY, 140, 20, kind="memcpy", stream=11), gpu("Stream Sync", 165, 5, kind="sync"),
            gpu(GEMM, 200, 50), {"ts": 500 * US, "dur": 10 * US, "kind": "cpu_op", "name": "aten::mm"}]
    (t,) = breakdowns(frame(rows)).temporal
    # span 0..250 µs; compute 0-100 and 200-250; communication alone 100-150; the copy alone
    # 150-160; the sync 165-170; idle 160-165 and 170-200
    assert (t.span_ns, t.compute_ns, t.communication_ns, t.memory_ns, t.other_ns, t.idle_ns) == (
        250 * US, 150 * US, 50 * US, 10 * US, 5 * US, 35 * US)
    assert t.non_compute_ns == 65 * US
    assert t.to_dict()["compute_pct"] == 60.0 and t.to_dict()["idle_pct"] == 14.0


def test_overlap_is_the_share_of_communication_time_with_computation_running():
    rows = [gpu(GEMM, 0, 100), gpu(GEMM, 90, 20, stream=8), gpu(NCCL, 50, 100, kind="collective", stream=9)]
    (o,) = breakdowns(frame(rows)).overlap
    # compute runs 0-110, communication 50-150: together 50-110
    assert (o.compute_ns, o.communication_ns, o.overlap_ns) == (110 * US, 100 * US, 60 * US)
    assert o.overlap_pct == pytest.approx(60.0)
    (alone,) = breakdowns(frame([gpu(GEMM, 0, 100)])).overlap
    assert alone.overlap_pct is None and alone.to_dict()["overlap_pct"] is None


def test_idle_time_is_split_by_what_the_stream_waited_for():
    rows = [launch(1, -5, 2), gpu(GEMM, 0, 10, corr=1),
            launch(2, 12, 2), gpu(GEMM, 15, 5, corr=2),        # launched after the previous ended: host wait 5
            launch(3, 16, 2), gpu(GEMM, 40, 5, corr=3),        # launched in time, 20 µs gap: kernel wait
            launch(4, 17, 2), gpu(GEMM, 145, 5, corr=4),       # launched in time, 100 µs gap: other
            gpu(GEMM, 160, 5, corr=99),                        # its launch is not in the trace: 10 µs kernel wait
            gpu("Stream Wait Event", 150, 10, kind="sync"),    # not a kernel: no part in idle time
            gpu(GEMM, 0, 30, stream=8, corr=5), launch(5, -1, 1)]
    lanes = {i.stream: i for i in breakdowns(frame(rows)).idle_time}
    seven = lanes[7]
    assert (seven.host_wait_ns, seven.kernel_wait_ns, seven.other_ns) == (5 * US, 30 * US, 100 * US)
    assert seven.to_dict()["host_wait_ratio"] == pytest.approx(5 / 135, abs=1e-4)
    assert lanes[8].idle_ns == 0


def test_kernel_breakdown_ranks_kernels_and_pools_the_rest():
    rows = [gpu(GEMM, 0, 10), gpu(GEMM, 20, 30), gpu(NCCL, 60, 25, kind="collective"),
            gpu(COPY, 90, 4, kind="memcpy"), gpu("triton_poi_fused_0", 100, 3), gpu("triton_red_fused_1", 110, 2)]
    (k,) = breakdowns(frame(rows), top_kernels=2).kernels
    assert [(s.name, s.kernel_type, s.count, s.total_ns) for s in k.top] == [
        (GEMM, "computation", 2, 40 * US), (NCCL, "communication", 1, 25 * US)]
    gemm = k.top[0]
    assert (gemm.mean_ns, gemm.min_ns, gemm.max_ns) == (20 * US, 10 * US, 30 * US)
    assert gemm.std_ns == pytest.approx(np.std([10 * US, 30 * US], ddof=1))
    assert (k.others.count, k.others.total_ns, k.others.min_ns, k.others.max_ns) == (3, 9 * US, 2 * US, 4 * US)
    assert {t.kernel_type: (t.count, t.total_ns) for t in k.by_type} == {
        "computation": (4, 45 * US), "communication": (1, 25 * US), "memory": (1, 4 * US)}
    assert sum(t.share_pct for t in k.by_type) == pytest.approx(100.0, abs=0.02)


def test_nsys_style_names_are_typed_by_their_kind():
    rows = [gpu("[CUDA memcpy Host-to-Device]", 0, 10, kind="memcpy"), gpu("AllReduce", 5, 10, kind="collective")]
    work = gpu_work(frame(rows))
    (t,) = temporal_breakdown(work)
    assert (t.memory_ns, t.communication_ns, t.compute_ns) == (5 * US, 10 * US, 0)


def test_launch_stats_pair_calls_with_their_work():
    rows = [launch(1, 0, 10), gpu(GEMM, 30, 5, corr=1),                  # delay 20 µs, kernel shorter than call
            launch(2, 10, 60), gpu(GEMM, 50, 100, corr=2),               # starts before the call ends: delay 0
            launch(3, 100, 5, name="cudaMemcpyAsync"), gpu(COPY, 300, 2, kind="memcpy", corr=3),  # delay 195 µs
            launch(4, 110, 5, name="cudaStreamSynchronize"), gpu("Stream Sync", 120, 1, kind="sync", corr=4)]
    (s,) = launch_stats(gpu_work(frame(rows)))
    assert s.launches == 3
    assert (s.cpu_duration.total_ns, s.gpu_duration.total_ns, s.launch_delay.total_ns) == (75 * US, 107 * US, 215 * US)
    assert (s.launch_delay.max_ns, s.launch_delay.p50_ns) == (195 * US, 20 * US)
    assert (s.gpu_shorter_than_launch, s.long_launches, s.delayed_launches) == (2, 1, 1)


def test_hip_launches_get_the_statistics_of_their_cuda_counterparts():
    """HTA counts CUDA's launch calls only; a ROCm trace's are their HIP twins. The driver's
    cuLaunchKernel stays out, as in HTA."""
    cuda = [launch(1, 0, 10), gpu(GEMM, 30, 5, corr=1), launch(2, 100, 5, name="cudaMemcpyAsync"),
            gpu(COPY, 300, 2, kind="memcpy", corr=2)]
    hip = [launch(1, 0, 10, name="hipLaunchKernel"), gpu(GEMM, 30, 5, corr=1),
           launch(2, 100, 5, name="hipMemcpyAsync"), gpu(COPY, 300, 2, kind="memcpy", corr=2),
           launch(3, 400, 5, name="hipModuleLaunchKernel"), gpu(GEMM, 410, 5, corr=3),
           launch(4, 500, 5, name="cuLaunchKernel"), gpu(GEMM, 510, 5, corr=4)]
    (c,) = launch_stats(gpu_work(frame(cuda)))
    (h,) = launch_stats(gpu_work(frame(hip)))
    assert (c.launches, h.launches) == (2, 3)
    assert h.launch_delay.max_ns == c.launch_delay.max_ns == 195 * US


def test_devices_are_kept_apart_per_file_and_device():
    two_files = pd.concat([frame([gpu(GEMM, 0, 10)], "rank0.json"), frame([gpu(GEMM, 0, 40)], "rank1.json")],
                          ignore_index=True)
    both = breakdowns(two_files).temporal
    assert [(t.artifact, t.device, t.compute_ns) for t in both] == [("rank0.json", 0, 10 * US), ("rank1.json", 0, 40 * US)]
    two_gpus = breakdowns(frame([gpu(GEMM, 0, 10, device=0), gpu(GEMM, 0, 20, device=1)])).temporal
    assert [(t.device, t.span_ns) for t in two_gpus] == [(0, 10 * US), (1, 20 * US)]


def test_a_trace_without_gpu_work_has_empty_breakdowns():
    result = breakdowns(frame([{"ts": 0, "dur": 5, "kind": "log", "name": "hello"}]))
    assert result.to_dict() == {"temporal": [], "idle_time": [], "kernels": [], "overlap": [], "launches": []}


def test_plain_string_columns_work_too():
    rows = [launch(1, 0, 2), gpu(GEMM, 5, 10, corr=1)]
    plain = frame(rows).astype({"kind": str, "name": str, "artifact": str})
    assert breakdowns(plain).to_dict() == breakdowns(frame(rows)).to_dict()


def test_to_dict_is_json():
    rows = [launch(1, 0, 2), gpu(GEMM, 5, 10, corr=1), gpu(NCCL, 8, 10, kind="collective", stream=9)]
    data = json.loads(json.dumps(breakdowns(frame(rows)).to_dict()))
    assert data["temporal"][0]["span_ns"] == 13 * US
    assert data["kernels"][0]["top"][0]["name"] == NCCL
    assert data["launches"][0]["launches"] == 1


def test_half_a_million_events_take_well_under_a_few_seconds():
    n = 500_000
    rng = np.random.default_rng(7)
    ts = np.cumsum(rng.integers(1, 20, n)) * US
    is_gpu = np.arange(n) % 2 == 1  # each launch call followed by its kernel
    corr = np.arange(n) // 2
    names = np.array([GEMM, NCCL, COPY, "Memset (Device)"])[rng.integers(0, 4, n)]
    kinds = np.where(names == NCCL, "collective", np.where(names == COPY, "memcpy",
                                                           np.where(names == GEMM, "kernel", "memset")))
    columns = {"ts": ts, "dur": rng.integers(1, 30, n) * US, "corr": corr,
               "kind": np.where(is_gpu, kinds, "runtime"), "name": np.where(is_gpu, names, "cudaLaunchKernel"),
               "device": np.where(is_gpu, corr % 2, -1), "stream": np.where(is_gpu, 7 + corr % 3, -1)}
    big = event_frame(pa.Table.from_batches([make_batch(columns, artifact="big.json", source="kineto")]))
    started = time.perf_counter()
    result = breakdowns(big)
    elapsed = time.perf_counter() - started
    assert sum(s.launches for s in result.launches) == n // 2
    assert len(result.temporal) == 2 and len(result.idle_time) == 6
    assert elapsed < 5.0, f"{elapsed:.1f} s for {n:,} events: is something looping per event?"


def test_nsight_compute_kernels_have_no_timeline_and_are_left_out():
    replayed = frame([gpu(GEMM, 0, 10), gpu(GEMM, 0, 20)])
    replayed["source"] = replayed["source"].cat.rename_categories({"kineto": "ncu"})
    assert breakdowns(replayed).to_dict()["temporal"] == []
