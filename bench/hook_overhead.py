"""What the capture hook costs a loop while an order waits for its occurrence (armed, idle),
against no hook at all, in one process: interleaved blocks of steps, one without `hook.step()`,
one with the hook armed for a `slow_step` profiler order whose factor is never reached. Each
pair of neighbouring blocks gives one ratio; the table reports the median and a 95% interval
of the mean (Student's t over the pairs). On a GPU the loop is launch-bound decode-like work
(many small kernels, one sync a step), where a per-step cost shows most.

    python -m bench.hook_overhead --device cuda --pairs 400 --block 200 [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path

import torch

from agent.hook import CaptureHook, folders, write_json


def step_fn(device: str, width: int, kernels: int):
    x = torch.randn(width, width, device=device)
    w = torch.randn(width, width, device=device) / width ** 0.5

    def step():
        nonlocal x
        for _ in range(kernels):
            x = torch.tanh(x @ w)
        if device != "cpu":
            torch.cuda.synchronize()
    return step


def armed_hook(root: Path) -> CaptureHook:
    requests, _, _ = folders(root)
    write_json(requests / "1.json", {"id": 1, "kind": "profiler", "trigger": "slow_step", "factor": 1000.0,
                                     "steps": 5, "expires_in": 10**9})
    hook = CaptureHook(root, poll_every=1.0)
    for _ in range(3):
        hook.step()
    assert hook._armed == "slow_step", "the hook did not arm"
    return hook


def block(step, hook, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        step()
        if hook is not None:
            hook.step()
    return (time.perf_counter() - start) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--block", type=int, default=200, help="steps per block")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--kernels", type=int, default=24, help="matmul+tanh pairs per step")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    step = step_fn(args.device, args.width, args.kernels)
    with tempfile.TemporaryDirectory() as tmp:
        hook = armed_hook(Path(tmp))
        block(step, None, 200)  # warm-up: module loading, cuBLAS handles, clocks
        block(step, hook, 200)
        off, on, ratios = [], [], []
        for i in range(args.pairs):
            order = (None, hook) if i % 2 == 0 else (hook, None)  # alternate which goes first
            times = {id(h): block(step, h, args.block) for h in order}
            a, b = times[id(None)], times[id(hook)]
            off.append(a)
            on.append(b)
            ratios.append(b / a - 1)
        assert hook._armed == "slow_step" and hook._profiler is None  # it stayed armed and idle throughout
    mean = statistics.fmean(ratios)
    half = 1.96 * statistics.stdev(ratios) / math.sqrt(len(ratios))
    result = {"device": torch.cuda.get_device_name() if args.device != "cpu" else "cpu", "torch": torch.__version__,
              "pairs": args.pairs, "block_steps": args.block, "kernels_per_step": 2 * args.kernels,
              "off_step_us_median": statistics.median(off) * 1e6, "on_step_us_median": statistics.median(on) * 1e6,
              "overhead_median_pct": statistics.median(ratios) * 100, "overhead_mean_pct": mean * 100,
              "overhead_mean_ci95_pct": [(mean - half) * 100, (mean + half) * 100]}
    if args.json:
        args.json.write_text(json.dumps({**result, "ratios": ratios}, indent=1))
    print(f"{'device':>24}: {result['device']}")
    for key in ("pairs", "block_steps", "kernels_per_step", "off_step_us_median", "on_step_us_median",
                "overhead_median_pct", "overhead_mean_pct"):
        value = result[key]
        print(f"{key:>24}: {value:.3f}" if isinstance(value, float) else f"{key:>24}: {value}")
    lo, hi = result["overhead_mean_ci95_pct"]
    print(f"{'mean 95% interval':>24}: [{lo:+.3f}%, {hi:+.3f}%]")


if __name__ == "__main__":
    main()
