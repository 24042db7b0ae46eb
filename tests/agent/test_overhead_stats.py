"""The statistics of bench/agent_overhead.py: the ratio of means and its interval, the
median's distribution-free interval, and --recompute from a run's recorded windows."""
from __future__ import annotations

import importlib.util
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("agent_overhead", ROOT / "bench" / "agent_overhead.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _windows(n: int, cost: float, noise: float, seed: int = 1) -> tuple[list[float], list[float]]:
    """off, on, off, ..., on, off steps/s: each window's rate drawn around 1000 with `noise`
    relative s.d., the on-windows `cost` slower."""
    rng = random.Random(seed)
    off = [1000 * (1 + rng.gauss(0, noise)) for _ in range(n + 1)]
    on = [1000 * (1 - cost) * (1 + rng.gauss(0, noise)) for _ in range(n)]
    return off, on


def test_ratio_of_means_is_unbiased_where_the_mean_of_ratios_is_not():
    """With 12% noise per window (the H200 VM's), 20,000 pairs and no cost at all: the mean of
    the per-pair ratios comes out clearly negative (E[on/off] > 1), the ratio of means does not."""
    off, on = _windows(20_000, cost=0.0, noise=0.12)
    stats = bench.overhead_stats(off, on)
    low, high = stats["overhead_mean_ci95_pct"]
    assert low < 0 < high
    assert stats["overhead_mean_of_pair_ratios_pct"] < -0.5  # Jensen: about -(0.12^2 * 0.75) = -1.1%
    assert abs(stats["overhead_mean_pct"]) < 0.3


def test_a_real_cost_is_found_inside_its_interval():
    off, on = _windows(4000, cost=0.01, noise=0.05, seed=7)
    stats = bench.overhead_stats(off, on)
    low, high = stats["overhead_mean_ci95_pct"]
    assert low < 1.0 < high and low > 0.5
    mlow, mhigh = stats["overhead_median_ci95_pct"]
    assert mlow < stats["overhead_pct"] < mhigh and mlow < 1.0 < mhigh
    assert stats["pairs_slower"] > 2000


def test_interval_coverage_over_many_runs():
    """95% intervals of the mean hold the true cost in about 95 of 100 independent runs."""
    hits = 0
    for seed in range(100):
        off, on = _windows(300, cost=0.004, noise=0.08, seed=seed)
        low, high = bench.overhead_stats(off, on)["overhead_mean_ci95_pct"]
        hits += low <= 0.4 <= high
    assert 88 <= hits <= 100


def test_median_interval_ranks():
    xs = list(range(100))
    median, low, high = bench.median_ci95(xs)
    assert median == 49.5 and (low, high) == (40, 60)  # ranks n/2 -+ 1.96 sqrt(n)/2, rounded outwards
    assert bench.median_ci95([3.0]) == (3.0, 3.0, 3.0)
    mean, half = bench.mean_ci95([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and half == pytest.approx(3.18 * statistics.stdev([1, 2, 3, 4]) / 2)


def test_windows_must_alternate():
    with pytest.raises(ValueError, match="one more off than on"):
        bench.overhead_stats([1.0, 2.0], [1.0, 2.0])


def test_recompute_prints_a_runs_figures_from_its_windows(tmp_path):
    off, on = _windows(200, cost=0.02, noise=0.03, seed=3)
    run = {"host": {"gpus": 1, "gpu_name": "NVIDIA H200", "driver": "580"}, "nvml_latency": [],
           "cases": [{"name": "after@0.1s", "steps_per_s_off": off, "steps_per_s_on": on,
                      "stalls_per_s_off": 0.1, "stalls_per_s_on": 0.2,
                      "stall_ms_per_s_off": 0.01, "stall_ms_per_s_on": 0.02}]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "agent_overhead.py"), "--recompute", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("after@0.1s"))
    expected = bench.overhead_stats(off, on)
    assert f"{expected['overhead_mean_pct']:+.2f}%" in row
    assert "[{:+.2f}, {:+.2f}]".format(*expected["overhead_mean_ci95_pct"]) in row
