"""tracedoc's breakdowns against HolisticTraceAnalysis's own, computed in the same run on HTA's
public test traces: within 1%, or differing exactly as docs/breakdowns.md explains.

HTA runs with ns rounding off (HTA_DISABLE_NS_ROUNDING=1): by default it moves each event's
start up and end down to whole µs, which on µs-long kernels is a change of definition, not of
precision (docs/breakdowns.md).
"""
import dataclasses
import logging
import shutil

import numpy as np
import pandas as pd
import pytest

from diagnosis.engine import scenarios
from diagnosis.engine.breakdowns import (
    NO_LAUNCH, GpuWork, comm_compute_overlap, gpu_work, hta_kernel_types, idle_time_breakdown, kernel_breakdown,
    launch_stats, temporal_breakdown,
)

pytest.importorskip("hta.trace_analysis", reason="HolisticTraceAnalysis is not installed (pip install -e '.[bench]')")
from hta.trace_analysis import TraceAnalysis  # noqa: E402  (only once HTA is known to be importable)

US = 1_000
TRACES = ("hta_nccl_data_rank0_ws2.json.gz",  # 3 profiler steps, NCCL kernels overlapping computation
          "hta_alexnet_critical_path_single_gpu.json.gz",  # no steps, copies, stream syncs
          "hta_cuda_event_sync_multi_stream.json.gz",  # three streams, a "Stream Wait Event"
          "hta_rank0_ws16_a100.json.gz")  # 5 steps, 872 GPU events launched before the trace began


def close(ours_ns: float, hta_us: float) -> bool:
    return ours_ns / US == pytest.approx(hta_us, rel=0.01, abs=0.01)


@pytest.fixture(scope="module")
def hta_rounding_off():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HTA_DISABLE_NS_ROUNDING", "1")
        yield


@dataclasses.dataclass
class Both:
    hta: TraceAnalysis
    frame: pd.DataFrame
    ours: GpuWork  # every GPU event of the trace, typed as tracedoc types them
    as_hta: GpuWork  # the events HTA keeps, typed by HTA's name patterns alone


@pytest.fixture(scope="module", params=TRACES)
def both(request, corpus_dir, tmp_path_factory, hta_rounding_off) -> Both:
    source = corpus_dir / "public" / "kineto" / request.param
    folder = tmp_path_factory.mktemp(request.param.split(".")[0])
    shutil.copy(source, folder / "rank0.json.gz")  # HTA reads every trace of a folder, one per rank
    logging.getLogger("hta").setLevel(logging.ERROR)
    analysis = TraceAnalysis(trace_dir=str(folder))
    frame = scenarios.events(source)
    ours = gpu_work(frame)
    kept = _kept_by_hta(frame, ours)
    as_hta = _select(ours, kept)
    return Both(analysis, frame, ours, dataclasses.replace(as_hta, kernel_type=hta_kernel_types(as_hta.name)))


def _kept_by_hta(frame: pd.DataFrame, work: GpuWork) -> np.ndarray:
    """HTA's Trace._filter_irrelevant_gpu_kernels: with two or more ProfilerStep events it keeps
    only GPU events whose launch call is in the trace and started before the last step began."""
    steps = frame.loc[frame["name"].astype(str).str.startswith("ProfilerStep#").to_numpy(), "ts"]
    if len(steps) < 2:
        return np.ones(len(work), bool)
    return (work.launch_ts != NO_LAUNCH) & (work.launch_ts < steps.max())


def _select(work: GpuWork, rows: np.ndarray) -> GpuWork:
    return dataclasses.replace(
        work, device=work.device[rows], stream=work.stream[rows], ts=work.ts[rows], end=work.end[rows],
        kernel_type=work.kernel_type[rows], kind=work.kind[rows], name=work.name[rows],
        launch_ts=work.launch_ts[rows], launch_dur=work.launch_dur[rows], launch_call=work.launch_call[rows])


def test_gpu_events_are_those_hta_keeps(both):
    hta_gpu = both.hta.t.get_trace(0).query("stream != -1")
    assert len(both.as_hta) == len(hta_gpu)
    # what HTA leaves out and tracedoc keeps: with two or more steps, GPU work launched before
    # the trace began, and the last step's work (an incomplete iteration, by HTA's choice)
    steps = both.frame.loc[both.frame["name"].astype(str).str.startswith("ProfilerStep#").to_numpy(), "ts"]
    if len(steps) < 2:
        assert len(both.ours) == len(hta_gpu)
        return
    launched_before_trace = int((both.ours.launch_ts == NO_LAUNCH).sum())
    launched_in_last_step = int((both.ours.launch_ts >= steps.max()).sum())
    assert len(both.ours) - len(hta_gpu) == launched_before_trace + launched_in_last_step > 0


def test_temporal_breakdown_matches_hta(both):
    (hta,) = both.hta.get_temporal_breakdown(visualize=False).to_dict("records")
    (t,) = temporal_breakdown(both.as_hta)
    assert close(t.span_ns, hta["kernel_time(us)"])
    assert close(t.idle_ns, hta["idle_time(us)"])
    assert close(t.compute_ns, hta["compute_time(us)"])
    assert close(t.non_compute_ns, hta["non_compute_time(us)"])
    # tracedoc's own typing moves cuda_sync waits HTA calls computation ("Stream Wait Event")
    # to "other": the busy time is the same, only its split differs, by exactly those waits
    (mine,) = temporal_breakdown(_select(both.ours, _kept_by_hta(both.frame, both.ours)))
    assert mine.idle_ns == t.idle_ns and mine.span_ns == t.span_ns
    waits_called_compute = (both.as_hta.kind == "sync") & (both.as_hta.kernel_type == 0)
    if waits_called_compute.any():
        without_waits = _select(both.as_hta, ~waits_called_compute)
        (no_waits,) = temporal_breakdown(without_waits)
        assert mine.compute_ns == no_waits.compute_ns < t.compute_ns
    else:
        assert (mine.compute_ns, mine.non_compute_ns) == (t.compute_ns, t.non_compute_ns)


def test_comm_compute_overlap_matches_hta(both):
    (hta,) = both.hta.get_comm_comp_overlap(visualize=False).to_dict("records")
    (o,) = comm_compute_overlap(both.as_hta)
    if o.overlap_pct is None:
        assert np.isnan(hta["comp_comm_overlap_pctg"])
    else:
        assert o.overlap_pct == pytest.approx(hta["comp_comm_overlap_pctg"], rel=0.01, abs=0.01)


def test_idle_time_breakdown_matches_hta(both):
    hta, _ = both.hta.get_idle_time_breakdown(visualize=False)
    hta = hta.pivot(index="stream", columns="idle_category", values="idle_time").fillna(0.0)
    ours = {i.stream: i for i in idle_time_breakdown(both.as_hta)}
    assert set(ours) == set(hta.index)
    for stream, row in hta.iterrows():
        mine = ours[stream]
        assert close(mine.host_wait_ns, row.get("host_wait", 0.0)), stream
        assert close(mine.kernel_wait_ns, row.get("kernel_wait", 0.0)), stream
        assert close(mine.other_ns, row.get("other", 0.0)), stream


def test_kernel_breakdown_matches_hta(both):
    n = len(both.as_hta.name.categories)
    _, hta = both.hta.get_gpu_kernel_breakdown(visualize=False, num_kernels=n + 1, include_memory_kernels=True)
    hta = hta.set_index("name")  # with num_kernels above the count of names HTA pools nothing into "others"
    (k,) = kernel_breakdown(both.as_hta, top_kernels=n)
    compared = 0
    for stats in k.top:
        if stats.name not in hta.index:  # HTA lists computation, communication and memory only
            assert stats.kernel_type == "other"
            continue
        row = hta.loc[stats.name]
        assert close(stats.total_ns, row["sum (us)"]) and close(stats.mean_ns, row["mean (us)"])
        assert close(stats.min_ns, row["min (us)"]) and close(stats.max_ns, row["max (us)"])
        assert close(stats.std_ns, row["stddev"])
        compared += 1
    assert compared == len(hta)
    # HTA's time per kernel type: computation and communication alone, and both at once
    types, _ = both.hta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=False)
    hta_types = dict(zip(types["kernel_type"], types["sum"]))
    (o,) = comm_compute_overlap(both.as_hta)
    ours_us = {"COMPUTATION": (o.compute_ns - o.overlap_ns) / US, "COMMUNICATION": (o.communication_ns - o.overlap_ns) / US,
               "COMPUTATION overlapping COMMUNICATION": o.overlap_ns / US}
    whole_us = not (both.as_hta.ts % US).any() and not (both.as_hta.end % US).any()
    # HTA cuts the time line at every start and end and truncates each piece to whole µs
    # (astype(int)): exact on µs traces, up to 1 µs short per piece on ns-resolution ones
    pieces = 2 * len(both.as_hta)
    for label, mine in ours_us.items():
        theirs = hta_types.get(label, 0)
        if whole_us:
            assert mine == pytest.approx(theirs, rel=0.01, abs=0.01), label
        else:
            assert 0 <= mine - theirs < pieces, label


def test_launch_stats_match_hta(both):
    hta = both.hta.get_cuda_kernel_launch_stats(visualize=False)[0]
    (s,) = launch_stats(both.as_hta)
    assert s.launches == len(hta)
    for ours, column in ((s.cpu_duration, "cpu_duration"), (s.gpu_duration, "gpu_duration"),
                         (s.launch_delay, "launch_delay")):
        values = hta[column]
        assert close(ours.mean_ns, values.mean()) and close(ours.max_ns, values.max())
        assert close(ours.p50_ns, values.quantile(0.5)) and close(ours.p95_ns, values.quantile(0.95))
    # HTA's charts flag the same outliers: runtime_cutoff 50 µs, launch_delay_cutoff 100 µs
    assert s.long_launches == int((hta["cpu_duration"] > 50).sum())
    assert s.delayed_launches == int((hta["launch_delay"] > 100).sum())
    assert s.gpu_shorter_than_launch == int((hta["gpu_duration"] < hta["cpu_duration"]).sum())


def test_triton_launch_op_with_a_stream_counts_as_gpu_time_in_hta(corpus_dir, tmp_path, hta_rounding_off):
    """HTA takes every event with a `stream` argument for GPU work, so the CPU op of a Triton
    launch (args.stream = 0) stretches its span; tracedoc takes GPU-side events only."""
    source = corpus_dir / "public" / "kineto" / "hta_triton_example.json.gz"
    shutil.copy(source, tmp_path / "rank0.json.gz")
    (hta,) = TraceAnalysis(trace_dir=str(tmp_path)).get_temporal_breakdown(visualize=False).to_dict("records")
    frame = scenarios.events(source)
    (t,) = temporal_breakdown(gpu_work(frame))
    launch_op = frame[(frame["kind"] == "cpu_op").to_numpy() & frame["attrs"].str.contains('"stream"').to_numpy()]
    assert len(launch_op) == 1 and t.compute_ns == t.span_ns  # one kernel, nothing idle
    work = gpu_work(frame)
    kernel_start, kernel_end = int(work.ts.min()), int(work.end.max())
    op_start, op_end = int(launch_op["ts"].iloc[0]), int(launch_op["ts"].iloc[0] + launch_op["dur"].iloc[0])
    hta_span = max(kernel_end, op_end) - min(kernel_start, op_start)
    assert close(hta_span, hta["kernel_time(us)"]) and not close(t.span_ns, hta["kernel_time(us)"])
