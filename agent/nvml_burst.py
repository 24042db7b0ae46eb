"""`nvml_burst` capture orders, which the agent takes itself (no program hook is involved):
NVML read at BURST_INTERVAL_S for the order's `duration_s`, written as the JSON lines
ingest/engine/parsers/nvml/jsonl.py reads, into the order's result folder (agent.hook's layout:
`results/<id>/` then `results/<id>.done.json`), where OnDemand ships it like any capture.

Why a burst: the agent samples at 10 Hz and nvidia-smi loggers at 1 Hz, too coarse to see a
power cap or a thermal slowdown that holds the clocks down for tens of milliseconds at a time;
100 Hz for a bounded window shows how much of the time the clocks are held and by which reason.
Bounded: the window by MAX_DURATION_S, the file by the order's `max_bytes` (sampling stops
there and what was written is kept).
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable

from agent.hook import DEFAULT_MAX_BYTES, take_order
from agent.nvml_sampler import DeviceReader, NvmlReader, NvmlUnavailable, Sampler, next_tick

log = logging.getLogger(__name__)

NVML_BURST = "nvml_burst"
BURST_INTERVAL_S = 0.01   # 100 Hz: ten times the agent's own rate
MAX_DURATION_S = 300.0    # the ceiling rules.engine.capture_plans puts on duration_s
WRITE_EVERY_S = 1.0       # the buffer goes to the file this often (and at the end)


def start_burst(order: dict, results: Path, host: str | None,
                reader: Callable[[], DeviceReader] = NvmlReader) -> threading.Thread:
    """Run the order in a thread of its own; its outcome lands in `results/<id>.done.json`."""
    thread = threading.Thread(target=run_burst, args=(order, results, host, reader),
                              name=f"nvml-burst-{order['id']}", daemon=True)
    thread.start()
    return thread


def run_burst(order: dict, results: Path, host: str | None,
              reader: Callable[[], DeviceReader] = NvmlReader) -> None:
    name = f"nvml_burst_{host or 'host'}.jsonl"
    take_order(results, order["id"], lambda out: _sample_into(out / name, order, host, reader),
               NvmlUnavailable, "no NVML on this host")


def _sample_into(path: Path, order: dict, host: str | None, reader: Callable[[], DeviceReader]) -> list[str]:
    duration = min(float(order.get("duration_s") or 30.0), MAX_DURATION_S)
    max_bytes = int(order.get("max_bytes") or DEFAULT_MAX_BYTES)
    # the slow fields (processes, ECC) stay at the agent's once a second: they cost 7-24 us a read
    sampler = Sampler(reader(), BURST_INTERVAL_S, host)
    written = 0
    try:
        with open(path, "wb") as f:
            start = next_at = time.monotonic()
            flush_at = start + WRITE_EVERY_S
            full = False
            while not full and (now := time.monotonic()) < start + duration:
                sampler.sample()
                if now >= flush_at:
                    flush_at = now + WRITE_EVERY_S
                    written, full = _append_within(f, sampler.drain(), written, max_bytes)
                next_at = next_tick(next_at, BURST_INTERVAL_S, time.monotonic())
                time.sleep(max(0.0, next_at - time.monotonic()))
            if not full:
                written, full = _append_within(f, sampler.drain(), written, max_bytes)
            if full:
                log.warning("nvml_burst cut at the order's bound of %d bytes", max_bytes)
    finally:
        sampler.stop()
    log.info("nvml_burst: %d samples of every GPU in %s", sampler.samples, path.name)
    return [path.name]


def _append_within(f, lines: bytes, written: int, max_bytes: int) -> tuple[int, bool]:
    """Append whole lines while the file stays within `max_bytes`; (bytes written in all,
    whether the bound cut the lines)."""
    room = max_bytes - written
    if len(lines) <= room:
        return written + f.write(lines), False
    head, newline, _ = lines[:max(0, room)].rpartition(b"\n")
    return written + f.write(head + newline), True
