"""What a kernel's launch configuration leaves of the GPU, from Nsight Compute's "Block Size" /
"Grid Size" columns ("(256, 1, 1)") and the SM count of its Launch Statistics.

A degenerate launch is one no tuning inside the kernel can rescue: a single thread (one lane
of one SM runs the whole kernel), blocks of fewer than 32 threads (every warp runs with idle
lanes), or a single block (one SM of the GPU's N works, the rest idle). The kernel row carries
the shape and, for a degenerate one, the problem and why it matters; the rule decides what
to report.
"""
from __future__ import annotations

import math

import re2  # linear time: the cells come from an upload

WARP = 32
_DIMS = re2.compile(r"^\(\s*(\d{1,10})\s*,\s*(\d{1,10})\s*,\s*(\d{1,10})\s*\)$")


def dims(text: str | None) -> tuple[int, int, int] | None:
    """"(256, 1, 1)" -> (256, 1, 1); None for anything else."""
    m = _DIMS.match((text or "").strip())
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def shape(block_text: str | None, grid_text: str | None, sm_count: float) -> dict:
    """The launch's shape as attrs: block and grid ("256x1x1"), threads_per_block, blocks, sm_count, and for a
    degenerate launch `launch_problem` (single_thread | sub_warp_blocks | single_block) and
    `launch_reason`. Empty when the sizes are unreadable."""
    block, grid = dims(block_text), dims(grid_text)
    if block is None or grid is None:
        return {}
    per_block, blocks = math.prod(block), math.prod(grid)
    sms = int(sm_count) if sm_count == sm_count and sm_count >= 1 else None
    out: dict = {"block": "x".join(map(str, block)), "grid": "x".join(map(str, grid)), "threads_per_block": per_block, "blocks": blocks,
                 "threads": per_block * blocks, "sm_count": sms}
    problem = _problem(per_block, blocks, sms)
    if problem:
        out["launch_problem"], out["launch_reason"] = problem
    return out


def _problem(per_block: int, blocks: int, sms: int | None) -> tuple[str, str] | None:
    of_sms = f" of its {sms}" if sms else ""
    if per_block * blocks == 1:
        return "single_thread", (f"one thread runs the whole kernel: one lane of one SM{of_sms}, so the GPU does "
                                 "the work serially at a tiny fraction of its throughput")
    if 0 < per_block < WARP:
        return "sub_warp_blocks", (f"blocks of {per_block} thread(s) fill only {per_block} of each warp's {WARP} "
                                   f"lanes: {100 * (WARP - per_block) / WARP:.0f}% of every warp the kernel runs "
                                   "is idle")
    if blocks == 1 and (sms is None or sms > 1):
        return "single_block", (f"a single block of {per_block} threads runs on one SM{of_sms}; the other SMs "
                                "stay idle for the kernel's whole duration")
    return None
