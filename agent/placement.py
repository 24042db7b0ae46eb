"""Keeping the agent out of the workload's way on the CPU: a lower CPU and I/O priority and,
where the host has CPUs to spare, one CPU of its own. All best effort: what cannot be done
(no permission, another OS) is skipped with a note, never an error.

Each setting applies to the calling thread and to the threads it starts afterwards (Linux
keeps nice value, I/O priority and affinity per thread). `run` applies them in its main
thread before starting any other, so the whole agent gets them; `wrap` applies them only in
its sampler thread, so the wrapped command keeps its own.
"""
from __future__ import annotations

import ctypes
import logging
import os
import platform
import threading

log = logging.getLogger(__name__)

DEFAULT_NICE = 10
MIN_CPUS_FOR_AUTO = 4  # below this, one CPU set aside is a large share: let the scheduler place it
_IOPRIO_SET = {"x86_64": 251, "aarch64": 30}  # syscall numbers
_IOPRIO_WHO_PROCESS, _IOPRIO_CLASS_BE, _IOPRIO_CLASS_SHIFT = 1, 2, 13
_IOPRIO_LOWEST_BE = 7  # best effort, lowest level: never starved outright, unlike the idle class


def lower_priority(nice: int = DEFAULT_NICE) -> list[str]:
    """Raise the calling thread's nice value to `nice` (0: leave it) and put its I/O at the
    lowest best-effort level. Returns what was done, for the log."""
    done = []
    tid = threading.get_native_id()
    if nice > 0 and hasattr(os, "setpriority"):
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < nice:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            done.append(f"nice {os.getpriority(os.PRIO_PROCESS, tid)}")
        except OSError as e:
            log.info("cannot lower the CPU priority: %s", e)
    if nice > 0 and (number := _IOPRIO_SET.get(platform.machine())) and os.name == "posix":
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            prio = (_IOPRIO_CLASS_BE << _IOPRIO_CLASS_SHIFT) | _IOPRIO_LOWEST_BE
            if libc.syscall(number, _IOPRIO_WHO_PROCESS, tid, prio) == 0:
                done.append("I/O best-effort 7")
            else:
                log.info("cannot lower the I/O priority: %s", os.strerror(ctypes.get_errno()))
        except (OSError, AttributeError) as e:
            log.info("cannot lower the I/O priority: %s", e)
    return done


def parse_cpus(spec: str) -> set[int]:
    """'3', '30-31', '0,4-5' -> CPU numbers."""
    cpus: set[int] = set()
    for part in spec.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"{spec!r}: CPUs as a list such as 31, 30-31 or 0,4-5")
        cpus.update(range(int(lo), int(hi) + 1) if sep else {int(lo)})
    return cpus


def choose_cpus(spec: str, allowed: set[int]) -> set[int]:
    """The CPUs to run on: 'none' -> none (leave placement to the scheduler); 'auto' -> the
    highest-numbered allowed CPU when there are at least MIN_CPUS_FOR_AUTO (serving and training
    processes are usually started, or pinned by torchrun/numactl, from CPU 0 up); else the
    listed ones that are allowed."""
    spec = spec.strip().lower()
    if spec == "none" or not allowed:
        return set()
    if spec == "auto":
        return {max(allowed)} if len(allowed) >= MIN_CPUS_FOR_AUTO else set()
    return parse_cpus(spec) & allowed


def pin_cpus(spec: str) -> str:
    """Pin the calling thread per `spec` (see choose_cpus); returns what was done, or ''."""
    if not hasattr(os, "sched_setaffinity"):
        return ""
    tid = threading.get_native_id()
    try:
        allowed = os.sched_getaffinity(tid)
    except OSError as e:
        log.info("cannot read the CPU affinity: %s", e)
        return ""
    cpus = choose_cpus(spec, allowed)
    if not cpus:
        if spec.strip().lower() not in ("none", "auto"):
            log.warning("--cpus %s: none of these CPUs is allowed here (allowed: %s); not pinned",
                        spec, _ranges(allowed))
        return ""
    try:
        os.sched_setaffinity(tid, cpus)
    except OSError as e:
        log.info("cannot set the CPU affinity: %s", e)
        return ""
    return f"CPU {_ranges(cpus)}"


def place_thread(nice: int = DEFAULT_NICE, cpus: str = "auto") -> None:
    """Lower priority and pin, then log what was done in one line."""
    done = lower_priority(nice) + [x for x in [pin_cpus(cpus)] if x]
    if done:
        log.info("agent placement: %s", ", ".join(done))


def _ranges(cpus: set[int]) -> str:
    out, run = [], []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            out.append(_span(run))
            run = []
        run.append(c)
    if run:
        out.append(_span(run))
    return ",".join(out)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
