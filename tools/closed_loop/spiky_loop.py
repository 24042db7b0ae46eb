"""A small loop whose every `--period`-th step also runs a slow piece of host work (a fake
checkpoint under `record_function("save_checkpoint")`): per-step latency records alone show
the spikes (latency.jitter) but not why; a profiler window around a spike shows it. The
closed-loop test and the GPU run drive it under `tracedoc-agent wrap`, with the capture hook.

    python tools/closed_loop/spiky_loop.py --steps 300 --out token_latency.jsonl [--device cuda]
    python tools/closed_loop/spiky_loop.py --steps 3000 --no-hook      # the overhead baseline
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from agent.hook import CaptureHook


def save_checkpoint(x: torch.Tensor, ms: float) -> None:
    """Host work of about `ms` milliseconds: serialising the state, the way a naive checkpoint does."""
    data = x.detach().cpu().numpy().tobytes()
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        json.dumps(list(data[:4096]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--period", type=int, default=6)
    ap.add_argument("--spike-ms", type=float, default=25.0)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="token_latency.jsonl")
    ap.add_argument("--no-hook", action="store_true", help="no capture hook at all (the overhead baseline)")
    ap.add_argument("--step-sleep-ms", type=float, default=0.0, help="keep the loop alive longer (s of waiting)")
    args = ap.parse_args()
    hook = None if args.no_hook else CaptureHook(poll_every=0.2)
    x = torch.randn(args.size, args.size, device=args.device)
    started = time.perf_counter()
    with open(args.out, "a") as out:
        for i in range(args.steps):
            t0 = time.time_ns()
            for _ in range(8):
                x = torch.tanh(x @ x)
            if i % args.period == args.period - 1:
                with torch.profiler.record_function("save_checkpoint"):
                    save_checkpoint(x, args.spike_ms)
            if args.device != "cpu":
                torch.cuda.synchronize()
            if args.step_sleep_ms:
                time.sleep(args.step_sleep_ms / 1000)
            t1 = time.time_ns()
            out.write(json.dumps({"step": i, "start_ns": t0, "end_ns": t1, "latency_ms": (t1 - t0) / 1e6}) + "\n")
            if hook is not None:
                hook.step()
    print(f"{args.steps} steps in {time.perf_counter() - started:.3f} s")


if __name__ == "__main__":
    main()
