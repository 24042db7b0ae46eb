"""An eBPF capture window: bpftrace with `host_stalls.bt` (uprobes on libcudart's synchronize
calls, and its launches when asked; futex waits per thread) for a bounded time, its output in the format
ingest/engine/parsers/perf/bpftrace.py reads.

Off unless asked for (`--ebpf`). Where it cannot run, `unavailable_reason` says why in one
line (no bpftrace, no privilege, kernel lockdown, libcudart not found) and the agent goes on
without it. Bounds: the window (bpftrace also exits by itself after it), the output size (past
it bpftrace is interrupted, so that it still prints its histograms, and the file is cut at a
line), and the process group is killed at the end whatever happened.
"""
from __future__ import annotations

import glob
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from agent.spool import safe_stream

log = logging.getLogger(__name__)

PROGRAM = Path(__file__).with_name("host_stalls.bt")
STREAM_PREFIX = "ebpf/host_stalls"
DEFAULT_MAX_BYTES = 64 * 1024**2
DEFAULT_MIN_US = 50
MAX_PIDS = 64
ATTACH_GRACE_S = 15.0   # attaching uprobes can take seconds on a large libcudart
EXIT_GRACE_S = 5.0      # after SIGINT: time to print the histograms
MAPS_ALLOWANCE = 1 << 20  # the histograms printed at exit may go past the size bound by this much
LOCKDOWN = Path("/sys/kernel/security/lockdown")
TRACEFS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
# Linux capability bits (include/uapi/linux/capability.h)
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39
# Where libcudart.so lives when no process of interest names it: the CUDA toolkit, distribution
# packages, and the pip wheels PyTorch depends on (nvidia-cuda-runtime-cu12 / cu13).
LIBCUDART_GLOBS = (
    "/usr/local/cuda/lib64/libcudart.so*",
    "/usr/local/cuda/targets/*/lib/libcudart.so*",
    "/usr/lib/x86_64-linux-gnu/libcudart.so*",
    "/usr/lib/aarch64-linux-gnu/libcudart.so*",
    "/usr/lib64/libcudart.so*",
    "/usr/local/lib/python3*/dist-packages/nvidia/cuda_runtime/lib/libcudart.so*",
    "/usr/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so*",
    "/opt/*/.venv/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so*",
    "/opt/conda/lib/libcudart.so*",
)
_CUDART_IN_MAPS = re.compile(rb"\s(/\S*/libcudart\.so[.\d]*)$", re.M)
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._+/-]+$")  # what a uprobe's path may hold inside the program
_MAPS_MAX = 4 * 1024**2


class EbpfUnavailable(Exception):
    """Why no capture can run here, in one line."""


@dataclass
class EbpfResult:
    path: Path             # the output (bpftrace's stdout and stderr)
    started_ns: int        # time.time_ns() and time.monotonic_ns() when it started: the clock
    monotonic_ns: int      # offset that lines bpftrace's nsecs up with the wall clock
    duration_s: float
    exit_code: int | None
    truncated: bool = False
    events: int = 0        # lines of the form "<nsecs> key=value ..."
    error: str = ""        # bpftrace's first ERROR line, when it failed
    notes: list[str] = field(default_factory=list)

    @property
    def clock_offset_ns(self) -> int:
        return self.started_ns - self.monotonic_ns


# -- can it run here? ---------------------------------------------------------------------------


def find_bpftrace(path_env: str | None = None) -> str | None:
    return shutil.which("bpftrace", path=path_env if path_env is not None else os.environ.get("PATH", ""))


def effective_capabilities(status: Path = Path("/proc/self/status")) -> int | None:
    """The CapEff bitmask of this process (None where /proc does not say)."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        return None
    return None


def privilege_reason(euid: int | None = None, caps: int | None = None) -> str | None:
    """None when this process may load tracing programs: root, or CAP_BPF with CAP_PERFMON
    (Linux 5.8+), or CAP_SYS_ADMIN."""
    euid = os.geteuid() if euid is None else euid
    caps = effective_capabilities() if caps is None else caps
    if caps is not None:
        has = lambda bit: bool(caps >> bit & 1)  # noqa: E731
        if has(CAP_SYS_ADMIN) or (has(CAP_BPF) and has(CAP_PERFMON)):
            return None
        return (f"no privilege to trace (uid {euid}, without CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN): run the "
                f"agent as root or give it those capabilities")
    if euid == 0:
        return None
    return f"no privilege to trace (uid {euid}): run the agent as root or with CAP_BPF and CAP_PERFMON"


def lockdown_reason(path: Path = LOCKDOWN) -> str | None:
    """Kernel lockdown in `confidentiality` mode forbids the reads tracing needs; `integrity`
    leaves uprobes and tracepoints alone."""
    try:
        text = path.read_text()
    except OSError:
        return None  # no lockdown LSM: nothing forbidden
    selected = re.search(r"\[(\w+)\]", text)
    if selected and selected.group(1) == "confidentiality":
        return f"kernel lockdown is in confidentiality mode ({path}): eBPF tracing is forbidden"
    return None


def tracefs_reason(roots: Iterable[Path] = TRACEFS) -> str | None:
    """The futex probes are syscall tracepoints: bpftrace finds them in tracefs, which
    containers and minimal VMs often do not mount."""
    if any((root / "events" / "syscalls" / "sys_enter_futex").exists() for root in roots):
        return None
    return ("tracefs is not mounted, so the syscall tracepoints cannot be found: mount it "
            "(mount -t tracefs nodev /sys/kernel/tracing)")


def libcudart_in_process(pid: int, proc: Path = Path("/proc")) -> Path | None:
    """The libcudart.so the process `pid` has mapped, if any."""
    try:
        with open(proc / str(pid) / "maps", "rb") as f:
            data = f.read(_MAPS_MAX)
    except OSError:
        return None
    m = _CUDART_IN_MAPS.search(data)
    return Path(m.group(1).decode("utf-8", "replace")) if m else None


def find_libcudart(pids: Iterable[int] = (), globs: Iterable[str] = LIBCUDART_GLOBS,
                   proc: Path = Path("/proc")) -> Path | None:
    """The libcudart to probe: the one a named process maps, else the first found in `globs`
    (a real file; the newest version first)."""
    for pid in pids:
        if (found := libcudart_in_process(pid, proc)) is not None and found.exists():
            return found
    for pattern in globs:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            path = Path(candidate)
            if path.is_file():
                return path.resolve()
    return None


def unavailable_reason(cuda: bool = True, libcudart: str | Path | None = None, pids: Iterable[int] = (),
                       path_env: str | None = None, lockdown: Path = LOCKDOWN,
                       globs: Iterable[str] = LIBCUDART_GLOBS, tracefs: Iterable[Path] = TRACEFS) -> str | None:
    """None if a capture can run, else why not, in one line. Checked in the order a host
    admin would fix them."""
    if find_bpftrace(path_env) is None:
        return "bpftrace is not installed (not on PATH): install it (apt install bpftrace) for eBPF captures"
    if (reason := privilege_reason()) is not None:
        return reason
    if (reason := lockdown_reason(lockdown)) is not None:
        return reason
    if (reason := tracefs_reason(tracefs)) is not None:
        return reason
    if cuda and resolve_libcudart(libcudart, pids, globs) is None:
        where = f" ({libcudart} does not exist)" if libcudart else " (not mapped by the processes named, nor in the usual places)"
        return f"libcudart not found{where}: give --ebpf-libcudart PATH"
    return None


def resolve_libcudart(libcudart: str | Path | None, pids: Iterable[int] = (),
                      globs: Iterable[str] = LIBCUDART_GLOBS) -> Path | None:
    if libcudart:
        path = Path(libcudart)
        return path.resolve() if path.is_file() else None
    return find_libcudart(pids, globs)


# -- the program ---------------------------------------------------------------------------------


def render_program(duration_s: float, libcudart: str | Path | None = None, pids: Iterable[int] = (),
                   min_us: int = DEFAULT_MIN_US, launches: bool = False, template: str | None = None) -> str:
    """host_stalls.bt with its placeholders filled. Without libcudart, futex waits only (then
    `pids` must name the processes); kernel launches only when asked (each probed call costs
    microseconds). Everything put into the program is checked: a path of plain characters,
    integer pids and bounds."""
    pids = sorted({int(p) for p in pids})
    if any(p <= 0 for p in pids) or len(pids) > MAX_PIDS:
        raise ValueError(f"pids must be at most {MAX_PIDS} positive integers, not {pids}")
    if not 0 < duration_s <= 24 * 3600:
        raise ValueError(f"the window must be between 0 and 24 h, not {duration_s} s")
    if not 0 <= int(min_us) <= 10**9:
        raise ValueError(f"min_us must be between 0 and 1e9, not {min_us}")
    text = template if template is not None else PROGRAM.read_text()
    if libcudart is None:
        text = re.sub(r"^//<cuda>\n.*?^//</cuda>\n", "", text, flags=re.S | re.M)
    if libcudart is None or not launches:
        text = re.sub(r"^//<launch>\n.*?^//</launch>\n", "", text, flags=re.S | re.M)
    text = re.sub(r"^\s*//.*\n", "", text, flags=re.M)  # the comments are for readers of the .bt file
    pid_test = " || ".join(f"pid == {p}" for p in pids)
    if libcudart is None:
        if not pids:
            raise ValueError("a futex-only capture (no libcudart) needs the pids to watch")
        futex_filter = pid_test
    else:
        path = str(libcudart)
        if not _SAFE_PATH.match(path):
            raise ValueError(f"libcudart path {path!r}: only letters, digits and . _ + - / can go into a probe")
        text = text.replace("{{LIBCUDART}}", path)
        futex_filter = pid_test or "@cuda_pids[pid]"
    if not pid_test:  # every process's CUDA calls: no predicate
        text = re.sub(r"^/ \{\{CUDA_FILTER\}\} /\n", "", text, flags=re.M)
    text = (text.replace("{{CUDA_FILTER}}", pid_test).replace("{{FUTEX_FILTER}}", futex_filter)
            .replace("{{MIN_US}}", str(int(min_us))).replace("{{DURATION_MS}}", str(max(1, round(duration_s * 1000)))))
    if (left := re.search(r"\{\{\w*\}\}", text)) is not None:
        raise ValueError(f"unfilled placeholder in the program: {left.group(0)}")
    return text


# -- running it ----------------------------------------------------------------------------------


def run_capture(program: str, out: Path, duration_s: float, max_bytes: int = DEFAULT_MAX_BYTES,
                bpftrace: str | None = None, stop: threading.Event | None = None,
                attach_grace_s: float = ATTACH_GRACE_S, exit_grace_s: float = EXIT_GRACE_S,
                poll_s: float = 0.2) -> EbpfResult:
    """Run `program` with bpftrace into `out` for at most duration_s (plus the time to attach),
    at most max_bytes of output, until `stop` is set. Its process group is killed at the end."""
    bpftrace = bpftrace or find_bpftrace()
    if bpftrace is None:
        raise EbpfUnavailable("bpftrace is not installed (not on PATH)")
    out.parent.mkdir(parents=True, exist_ok=True)
    prog_path = out.with_name(out.name + ".bt")
    prog_path.write_text(program)
    started_ns, mono_ns, t0 = time.time_ns(), time.monotonic_ns(), time.monotonic()
    truncated, notes = False, []
    with open(out, "wb") as sink:
        proc = subprocess.Popen([bpftrace, "-B", "full", str(prog_path)], stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = t0 + duration_s + attach_grace_s
            while proc.poll() is None:
                if _size(out) > max_bytes:
                    truncated = True
                    notes.append(f"output reached {max_bytes} bytes: stopped early")
                    break
                if time.monotonic() >= deadline:
                    notes.append("still running past its window: stopped")
                    break
                if stop is not None and stop.wait(poll_s):
                    notes.append("stopped with the agent")
                    break
                if stop is None:
                    time.sleep(poll_s)
            if proc.poll() is None:  # SIGINT: bpftrace prints its maps and exits
                _signal_group(proc, signal.SIGINT)
                try:
                    proc.wait(exit_grace_s)
                except subprocess.TimeoutExpired:
                    notes.append(f"no exit {exit_grace_s:.0f} s after SIGINT: killed")
        finally:
            _signal_group(proc, signal.SIGKILL)  # whatever it started goes too
            proc.wait()
    prog_path.unlink(missing_ok=True)
    if _size(out) > max_bytes + MAPS_ALLOWANCE:
        _cut_keeping_maps(out, max_bytes)
        truncated = True
    events, error = _scan(out)
    return EbpfResult(out, started_ns, mono_ns, time.monotonic() - t0, proc.returncode, truncated, events, error, notes)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session: its pid is its group's id
    except (ProcessLookupError, PermissionError):
        pass


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _cut_keeping_maps(path: Path, limit: int) -> None:
    """The event lines cut at `limit` (at a line end), then the maps bpftrace printed when it
    exited (from the first `@` line of the last MAPS_ALLOWANCE bytes): between our SIGINT and
    its exit a busy probe can write far more than the allowance, and the histograms at the end
    are what a capture is for."""
    size = _size(path)
    with open(path, "r+b") as f:
        f.seek(max(0, size - MAPS_ALLOWANCE))
        tail = f.read()
        at = tail.find(b"\n@")
        maps = tail[at:] if at >= 0 else b""
    _cut_at_line(path, limit)
    with open(path, "ab") as f:
        f.write(maps)


def _cut_at_line(path: Path, limit: int) -> None:
    with open(path, "r+b") as f:
        f.seek(max(0, limit - 65536))
        tail = f.read(min(limit, 65536))
        cut = tail.rfind(b"\n")
        f.truncate(max(0, limit - len(tail)) + cut + 1 if cut >= 0 else limit)


_EVENT_LINE = re.compile(rb"^\d{6,19}\s+\S+=\S+")


def _scan(path: Path) -> tuple[int, str]:
    """(event lines, bpftrace's last ERROR line) of the output: the last is the one that
    stopped it (the first is often a harmless complaint about RLIMIT_MEMLOCK)."""
    events, error = 0, ""
    with open(path, "rb") as f:
        for line in f:
            if _EVENT_LINE.match(line):
                events += 1
            elif b"ERROR:" in line[:400]:
                error = line.decode("utf-8", "replace").strip()[:300]
    return events, error


# -- the agent's side ----------------------------------------------------------------------------


@dataclass
class EbpfOptions:
    window_s: float
    every_s: float = 0.0           # 0: one window, at the start
    libcudart: str | None = None
    pids: tuple[int, ...] = ()
    cuda: bool = True              # False: futex waits of `pids` only
    max_bytes: int = DEFAULT_MAX_BYTES
    min_us: int = DEFAULT_MIN_US
    launches: bool = False         # also probe cudaLaunchKernel (costly on launch-bound loops)


def capture_into_spool(opts: EbpfOptions, spool, stop: threading.Event, seq: int = 0) -> EbpfResult | None:
    """One window into the spool: the output as `ebpf/host_stalls-<start>.bpftrace.txt` and a
    tracedoc-clock.json beside it that lines its monotonic timestamps up with the wall clock.
    None (with the reason logged) when it cannot run or produced nothing."""
    if (reason := unavailable_reason(opts.cuda, opts.libcudart, opts.pids)) is not None:
        log.warning("eBPF capture unavailable: %s", reason)
        return None
    libcudart = resolve_libcudart(opts.libcudart, opts.pids) if opts.cuda else None
    program = render_program(opts.window_s, libcudart, opts.pids, opts.min_us, opts.launches)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = spool.tmp / f"ebpf-{os.getpid()}-{seq}.txt"
    try:
        result = run_capture(program, out, opts.window_s, opts.max_bytes, stop=stop)
        if result.events == 0 and result.exit_code not in (0, None, -signal.SIGINT):
            log.warning("eBPF capture failed: %s", result.error or f"bpftrace exited {result.exit_code}")
            return None
        name = f"host_stalls-{stamp}-{seq}.bpftrace.txt"
        spool.add_file(f"ebpf/{name}", out)
        clock = {"offsets_ns": {name: result.clock_offset_ns}}
        spool.add_chunk(safe_stream(f"ebpf/{stamp}-{seq}/tracedoc-clock.json"), json.dumps(clock).encode())
        log.info("eBPF capture: %d events in %.1f s%s", result.events, result.duration_s,
                 "; " + "; ".join(result.notes) if result.notes else "")
        return result
    finally:
        out.unlink(missing_ok=True)


def start_ebpf_thread(opts: EbpfOptions, spool, stop: threading.Event) -> threading.Thread:
    """Windows on a thread of their own: one at the start, then one every opts.every_s."""
    def loop():
        seq = 0
        while not stop.is_set():
            if capture_into_spool(opts, spool, stop, seq) is None and seq == 0:
                return  # unavailable (said once) or failed at the first try: no retries every window
            seq += 1
            if not opts.every_s or stop.wait(max(0.0, opts.every_s - opts.window_s)):
                return
    thread = threading.Thread(target=loop, name="ebpf", daemon=True)
    thread.start()
    return thread
