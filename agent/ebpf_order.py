"""`ebpf` capture orders, which the agent takes itself (no program hook is involved): one
host_stalls window (agent.ebpf: where the host threads of CUDA programs wait, in CUDA
synchronisations and futex waits) for the order's `duration_s`, into the order's result folder
(agent.hook's layout: `results/<id>/` then `results/<id>.done.json`), where OnDemand ships it
like any capture, with a tracedoc-clock.json that puts bpftrace's monotonic times on the wall
clock.

Why: a GPU idle in long gaps while the host is "busy elsewhere" (gpu.idle-gaps) is decided by
what the host threads wait on meanwhile, which a profiler window of the program does not show
but a kernel-side window of every CUDA process does.
Bounded: the window by MAX_DURATION_S, the output by the order's `max_bytes` (bpftrace is
interrupted there and the file cut at a line, keeping its histograms). Where the agent cannot
trace (no bpftrace, no privilege, kernel lockdown, no tracefs, no libcudart) the order fails at
once with agent.ebpf's one-line reason, which goes back to the server.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.ebpf import (DEFAULT_MAX_BYTES, EbpfResult, EbpfUnavailable, render_program, resolve_libcudart,
                        run_capture, unavailable_reason)
from agent.hook import take_order, write_json

log = logging.getLogger(__name__)

EBPF = "ebpf"
MAX_DURATION_S = 300.0   # the ceiling rules.engine.capture_plans puts on duration_s
DEFAULT_DURATION_S = 30.0


@dataclass(frozen=True)
class EbpfOrderSettings:
    """What the agent was told about tracing on this host (`run --ebpf-libcudart`), and the
    checks and runner it uses (tests give their own)."""
    libcudart: str | None = None
    reason: Callable[[str | None], str | None] = lambda libcudart: unavailable_reason(True, libcudart)
    run: Callable[..., EbpfResult] = run_capture


DEFAULT_SETTINGS = EbpfOrderSettings()


def start_ebpf_order(order: dict, results: Path, host: str | None,
                     settings: EbpfOrderSettings = DEFAULT_SETTINGS) -> threading.Thread:
    """Run the order in a thread of its own; its outcome lands in `results/<id>.done.json`."""
    thread = threading.Thread(target=run_ebpf_order, args=(order, results, host, settings),
                              name=f"ebpf-order-{order['id']}", daemon=True)
    thread.start()
    return thread


def run_ebpf_order(order: dict, results: Path, host: str | None,
                   settings: EbpfOrderSettings = DEFAULT_SETTINGS) -> None:
    take_order(results, order["id"], lambda out: _capture_into(out, order, host, settings),
               EbpfUnavailable, "no eBPF capture on this host")


def _capture_into(out: Path, order: dict, host: str | None, settings: EbpfOrderSettings) -> list[str]:
    if (reason := settings.reason(settings.libcudart)) is not None:
        raise EbpfUnavailable(reason)
    duration = min(float(order.get("duration_s") or DEFAULT_DURATION_S), MAX_DURATION_S)
    max_bytes = int(order.get("max_bytes") or DEFAULT_MAX_BYTES)
    libcudart = resolve_libcudart(settings.libcudart)
    if libcudart is None:  # the check found one a moment ago; it may have gone since
        raise EbpfUnavailable("libcudart not found: give --ebpf-libcudart PATH")
    name = f"host_stalls_{host or 'host'}.bpftrace.txt"
    # no pids: an order names no process, so every process's CUDA calls, and their threads' futex waits
    result = settings.run(render_program(duration, libcudart), out / name, duration, max_bytes)
    if result.events == 0 and result.error:
        raise EbpfUnavailable(result.error)
    write_json(out / "tracedoc-clock.json", {"offsets_ns": {name: result.clock_offset_ns}})
    log.info("ebpf capture: %d events in %.1f s%s", result.events, result.duration_s,
             "; " + "; ".join(result.notes) if result.notes else "")
    return [name, "tracedoc-clock.json"]
