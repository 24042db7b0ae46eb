"""What the GPU-host agent costs a workload on the same GPU host: ABAB windows in one run.

    python bench/agent_overhead.py [--case name=after,interval=0.1,workload=launch ...]
                                   [--toggle stop|restart] [--window S] [--cycles N] [--json out.json]
                                   [--workload-cpu N] [--warmup S]

1. NVML call latency, per call type (median and p90 of up to --latency-n calls, at most
   --latency-budget seconds each), on GPU 0 of this host.
2. For each case: a workload runs in this process without a break while `tracedoc-agent run`
   (server unreachable, so bundles spool; following a log the workload writes; watching a
   dump folder) is off and on in alternating windows: off, on, off, ..., on, off (`cycles`
   on-windows). Steps/s per window; each on-window is compared with the mean of the
   off-windows either side (the per-pair delta), which cancels slow drift: on a shared
   virtual machine the launch-bound loop's speed wanders by 20-40% over tens of seconds, far
   more than the agent's cost, so the figures come from many short pairs. Also per window: steps longer than --stall-ms and the time they took
   beyond it, per second: a driver call that blocks the workload (the PCIe throughput query,
   ~20 ms) shows there however noisy the throughput is.

   --toggle stop (default): the agent is started once and frozen with SIGSTOP in the
   off-windows (it takes no CPU and makes no driver call; resumed with SIGCONT), so windows
   can be short (1 s) and many (30 pairs). --toggle restart: the agent process is started and
   stopped per window (the first --skip seconds of each window are not counted: the agent's
   clock starts once it logged "capturing into"; when stopping, it has exited before the
   window starts); windows must then be long (8 s), so pairs are few.

   Figures: the median of the per-pair deltas and the ratio of means (1 - sum(on) / sum(off
   either side); the mean of per-pair ratios is biased low by the noise), each with its 95%
   interval. The launch-bound loop's noise on a VM is mostly per step, so many short windows
   (--window 0.02: 8000 pairs in 5.5 minutes) resolve far more per minute than long ones; a
   frozen agent's missed tick runs when it is resumed, so short windows overstate its cost
   (never understate it). Case agent=none is the A/A control: a sleeping process toggled the
   same way. --recompute JSON prints an earlier run's figures again from its windows.

   --workload-cpu N pins the workload (this process and the threads it starts) to CPU N; the
   agent is started with this process's original CPU set, so its own `--cpus auto` places it
   on the highest-numbered CPU, away from the workload. On a VM most of the window-to-window
   noise of the launch-bound loop is the workload's thread moving between CPUs. The first
   --warmup seconds of each case (clocks up, allocator settled) are not measured, and the SM
   clock is read once per window (one ~1 us NVML call) to tell a clock change from the agent.

Workloads: `launch` is launch-bound, like decoding at batch 1: 24 x Linear(2048, 2048) bf16
at batch 1, each followed by GELU, torch.cuda.synchronize() every step. `decode` is
launch-bound with another shape, a decoding step at batch 1: 4 pre-norm transformer blocks
(d=2048, 16 heads; LayerNorm, QKV matmul, the new key and value written into a 512-token
cache, q.K^T, softmax, .V, output matmul, LayerNorm, 4x MLP with GELU, residuals; 64 small
kernels a step on the H200, by torch.profiler), synchronized every step. `gpu` is GPU-bound: one 8192^3 bf16 matmul per step,
synchronized.

Case keys: name, interval (the agent's --interval, s), workload (launch|decode|gpu), cycles,
agent (a folder holding the `agent` package to run, default this checkout; `none`: the A/A
control, a process that only sleeps; `probe-pcie` runs
a probe that only makes the PCIe throughput queries of the agent as it was on main: TX and
RX on every GPU once a second), pcie (1: pass --pcie). Without --case: this checkout's agent
on the launch-bound loop at 0.1 s and 0.01 s, and on the GPU-bound loop at 0.1 s.

Without NVML the latency part is skipped; without a CUDA GPU and PyTorch the ABAB part is
skipped; each with a one-line reason, exit status 0.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY_MARKERS = (b"capturing into", b"probe ready")
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: connection refused, bundles stay in the spool


# -- NVML latency ------------------------------------------------------------------------------


def nvml_latencies(n: int, budget_s: float) -> tuple[dict, list[dict]]:
    """({gpu facts}, [{call, median_us, p90_us, n, error}]) for GPU 0; ({}, []) without NVML."""
    try:
        import pynvml as nv  # optional: absent or driverless hosts skip the table, not the bench
        nv.nvmlInit()
    except Exception as e:  # ImportError or NVMLError: no driver, no GPU
        print(f"agent_overhead: NVML unavailable ({e}); NVML latencies skipped")
        return {}, []
    h = nv.nvmlDeviceGetHandleByIndex(0)
    facts = {"gpus": nv.nvmlDeviceGetCount(), "gpu_name": _text(nv.nvmlDeviceGetName(h)),
             "driver": _text(nv.nvmlSystemGetDriverVersion())}
    events = nv.nvmlEventSetCreate()
    try:
        nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, events)
    except nv.NVMLError:
        pass
    sys.path.insert(0, str(ROOT))
    from agent import nvml_sampler as ns  # this checkout's, once ROOT is on sys.path

    def xid_poll():
        try:
            nv.nvmlEventSetWait_v2(events, 0)
        except nv.NVMLError_Timeout:
            pass

    reader = ns.NvmlReader(pcie=False)
    reader_pcie = ns.NvmlReader(pcie=True)
    calls = {
        "utilization": lambda: nv.nvmlDeviceGetUtilizationRates(h),
        "memory info": lambda: nv.nvmlDeviceGetMemoryInfo(h),
        "power": lambda: nv.nvmlDeviceGetPowerUsage(h),
        "temperature": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        "clock SM": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
        "clock memory": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
        "clocks-event reasons": lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
        "ECC uncorrected total": lambda: nv.nvmlDeviceGetTotalEccErrors(
            h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC),
        "running processes": lambda: nv.nvmlDeviceGetComputeRunningProcesses(h),
        "Xid event poll": xid_poll,
        "field values [ECC]": lambda: nv.nvmlDeviceGetFieldValues(h, [ns.FI_ECC_DBE_VOL_TOTAL]),
        "field values [ECC, PCIe TX/RX bytes]": lambda: nv.nvmlDeviceGetFieldValues(
            h, [ns.FI_ECC_DBE_VOL_TOTAL, ns.FI_PCIE_COUNT_TX_BYTES, ns.FI_PCIE_COUNT_RX_BYTES]),
        "agent sample, every-sample fields": lambda: reader.read(0, False),
        "agent sample, once-a-second fields": lambda: reader.read(0, True),
        "agent sample, once-a-second with --pcie": lambda: reader_pcie.read(0, True),
        "PCIe throughput TX": lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES),
        "PCIe throughput RX": lambda: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES),
    }
    rows = [_time_call(name, fn, n, budget_s, nv.NVMLError) for name, fn in calls.items()] if n > 0 else []
    pcie_fields = nv.nvmlDeviceGetFieldValues(h, [ns.FI_PCIE_COUNT_TX_BYTES])[0]
    facts["pcie_byte_counters"] = int(pcie_fields.nvmlReturn) == ns.NVML_SUCCESS
    nv.nvmlEventSetFree(events)
    return facts, rows


def _time_call(name: str, fn, n: int, budget_s: float, error_type) -> dict:
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    try:
        fn()  # first call: lazy symbol lookup, not counted
        while len(times) < n and time.perf_counter() < deadline:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    except error_type as e:
        return {"call": name, "n": len(times), "error": str(e)}
    times.sort()
    return {"call": name, "n": len(times), "median_us": round(statistics.median(times) * 1e6, 1),
            "p90_us": round(times[int(0.9 * (len(times) - 1))] * 1e6, 1)}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- workloads ---------------------------------------------------------------------------------


def pin_workload(cpu: int | None) -> set[int] | None:
    """Pin the calling thread (and every thread or child it starts later) to `cpu`; returns
    the CPU set it had, for the agent, or None when not pinned."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return None
    original = os.sched_getaffinity(0)
    if cpu not in original:
        raise SystemExit(f"agent_overhead: --workload-cpu {cpu} is not one of this process's CPUs {sorted(original)}")
    os.sched_setaffinity(0, {cpu})
    return original


def sm_clock_reader():
    """A function returning GPU 0's SM clock in MHz (None without NVML)."""
    try:
        import pynvml as nv  # optional: without it the SM clock column stays empty
        nv.nvmlInit()
        h = nv.nvmlDeviceGetHandleByIndex(0)
        return lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
    except Exception:  # no NVML: the clock column stays empty
        return lambda: None


def make_workload(kind: str, log_path: Path):
    import torch  # torch only on the GPU machine: --help, --recompute and the tests run without it
    dev = torch.device("cuda:0")
    torch.manual_seed(0)
    if kind == "launch":
        layers = [torch.nn.Linear(2048, 2048, device=dev, dtype=torch.bfloat16) for _ in range(24)]
        x0 = torch.randn(1, 2048, device=dev, dtype=torch.bfloat16)
        gelu = torch.nn.functional.gelu

        def body():
            x = x0
            for layer in layers:
                x = gelu(layer(x))
    elif kind == "decode":  # 4 pre-norm transformer blocks, one token against a 512-token KV cache
        d, heads, ctx = 2048, 16, 512
        hd, bf16 = d // heads, torch.bfloat16
        lin = lambda i, o: torch.nn.Linear(i, o, device=dev, dtype=bf16)
        norm = lambda: torch.nn.LayerNorm(d, device=dev, dtype=bf16)
        blocks = [(norm(), lin(d, 3 * d), lin(d, d), norm(), lin(d, 4 * d), lin(4 * d, d),
                   torch.randn(heads, ctx, hd, device=dev, dtype=bf16),
                   torch.randn(heads, ctx, hd, device=dev, dtype=bf16)) for _ in range(4)]
        x0 = torch.randn(1, d, device=dev, dtype=bf16)
        gelu, softmax = torch.nn.functional.gelu, torch.softmax

        def body():
            x = x0
            for ln1, qkv, out, ln2, up, down, k, v in blocks:
                q, k_new, v_new = qkv(ln1(x)).view(3, heads, 1, hd)
                k[:, -1:].copy_(k_new)  # the new token's key and value into the cache's last slot
                v[:, -1:].copy_(v_new)
                att = softmax((q @ k.transpose(1, 2)) * hd ** -0.5, dim=-1)
                x = x + out((att @ v).view(1, d))
                x = x + down(gelu(up(ln2(x))))
    elif kind == "gpu":
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

        def body():
            torch.mm(a, b)
    else:
        raise SystemExit(f"agent_overhead: unknown workload {kind!r} (launch, decode or gpu)")
    log = open(log_path, "ab", buffering=0)
    count = 0

    def step():
        nonlocal count
        with torch.inference_mode():
            body()
        torch.cuda.synchronize()
        count += 1
        if count % 200 == 0:  # a serving process's log line now and then, for the agent to follow
            log.write(b"%.6f step %d tokens/s ok\n" % (time.time(), count))
    return step


def run_for(step, seconds: float) -> int:
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        step()
        n += 1
    return n


def measure(step, seconds: float, stall_s: float) -> tuple[float, int, float]:
    """(steps/s, steps longer than stall_s, seconds those steps took beyond stall_s)."""
    n, stalls, excess = 0, 0, 0.0
    t0 = prev = time.perf_counter()
    end = t0 + seconds
    while prev < end:
        step()
        now = time.perf_counter()
        if now - prev > stall_s:
            stalls, excess = stalls + 1, excess + (now - prev - stall_s)
        n, prev = n + 1, now
    return n / (prev - t0), stalls, excess


# -- the agent ---------------------------------------------------------------------------------


class Agent:
    """`tracedoc-agent run` (or the PCIe probe) as a child process, started and stopped per window."""

    def __init__(self, source: str, interval: float, pcie: bool, work: Path, cpus: set[int] | None = None):
        self.source, self.interval, self.pcie, self.work = source, interval, pcie, work
        self.cpus = cpus  # the CPU set to start it with (the bench's own, before the workload was pinned)
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        spool = self.work / f"spool-{self.runs}"
        self.err = self.work / f"agent-{self.runs}.err"
        if self.source == "probe-pcie":
            cmd, env = [sys.executable, str(Path(__file__).resolve()), "--probe-pcie"], dict(os.environ)
        elif self.source == "none":  # the A/A control: a process that only sleeps, toggled like the agent
            cmd, env = [sys.executable, str(Path(__file__).resolve()), "--probe-idle"], dict(os.environ)
        else:
            root = ROOT if self.source in ("", "checkout") else Path(self.source).resolve()
            cmd = [sys.executable, "-m", "agent.main", "run", "--server", UNREACHABLE, "--token", "bench",
                   "--spool", str(spool), "--interval", str(self.interval), "--ship-timeout", "1",
                   "--logs", str(self.work / "*.log"), "--dumps", str(self.work / "dumps")]
            cmd += ["--pcie"] if self.pcie else []
            env = {**os.environ, "PYTHONPATH": str(root)}
        # A child inherits the affinity of the thread that forks it: widen this thread's for the
        # fork only, so the agent sees every CPU and places itself (`--cpus auto`).
        pinned = os.sched_getaffinity(0) if self.cpus else None
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)
        try:
            self.proc = subprocess.Popen(cmd, cwd=self.work, env=env, stdout=subprocess.DEVNULL,
                                         stderr=open(self.err, "wb"), start_new_session=True)
        finally:
            if pinned:
                os.sched_setaffinity(0, pinned)

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise SystemExit(f"agent_overhead: the agent exited ({self.proc.returncode}):\n{self.tail()}")
        data = self.err.read_bytes()
        return any(m in data for m in READY_MARKERS)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """Freeze it (SIGSTOP): it takes no CPU and makes no driver call until resume(). A call
        in flight in the driver completes first: signals are taken on the way back."""
        if self.alive():
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)  # a paused agent must run to see the SIGTERM
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def tail(self) -> str:
        return self.err.read_text(errors="replace")[-2000:]


def probe_pcie() -> int:
    """The PCIe throughput queries of the agent on main, alone: TX and RX, every GPU, each second."""
    import pynvml as nv  # only in the --probe-pcie child, which needs NVML and nothing else
    nv.nvmlInit()
    handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    print("probe ready", file=sys.stderr, flush=True)
    while not stop:
        for h in handles:
            nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES)
            nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES)
        time.sleep(1.0)
    return 0


def probe_idle() -> int:
    """Sleeps until SIGTERM: the A/A control's `agent`, so that both arms pay the same signals."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("probe ready", file=sys.stderr, flush=True)
    stop.wait()
    return 0


def mean_ci95(xs: list[float], lag1: bool = False) -> tuple[float, float]:
    """(mean, half-width of its 95% interval): Student's t for small samples, 1.96 beyond 120.
    lag1: the values are a series whose neighbours may be correlated (ABAB pairs share an
    off-window), so the variance of the mean is (g0 + 2 g1) / n with g1 the lag-1
    autocovariance, taken when positive (a negative one would narrow the interval)."""
    n = len(xs)
    if n < 2:
        return (xs[0] if xs else float("nan")), float("nan")
    t = 1.96 if n > 120 else _T975.get(n - 1) or _T975[min(k for k in _T975 if k >= n - 1)]
    mean, var = statistics.fmean(xs), statistics.variance(xs)
    if lag1 and n > 2:
        g1 = sum((xs[i] - mean) * (xs[i + 1] - mean) for i in range(n - 1)) / (n - 1)
        var += 2 * max(g1, 0.0)
    return mean, t * (var / n) ** 0.5


# Student's t, 97.5th percentile, by degrees of freedom (the missing ones take the next listed, a
# slightly wider interval).
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23,
         15: 2.13, 20: 2.09, 30: 2.04, 40: 2.02, 60: 2.00, 120: 1.98}


def median_ci95(xs: list[float]) -> tuple[float, float, float]:
    """(median, low, high): the distribution-free 95% interval of the median, from the order
    statistics whose ranks the binomial(n, 1/2) puts 1.96 standard deviations either side."""
    ys = sorted(xs)
    n = len(ys)
    half = 1.96 * (n ** 0.5) / 2
    lo, hi = max(int(n / 2 - half), 0), min(int(n / 2 + half + 1), n - 1)  # 0-based ranks, rounded outwards
    return statistics.median(ys), ys[lo], ys[hi]


# -- ABAB ----------------------------------------------------------------------------------------


def run_case(case: dict, toggle: str, window: float, skip: float, stall_s: float, work: Path,
             warmup: float = 3.0, agent_cpus: set[int] | None = None, sm_clock=lambda: None) -> dict:
    step = make_workload(case["workload"], work / "serving.log")
    run_for(step, warmup)  # not measured: clocks up, caches and allocator settled
    agent = Agent(case["agent"], case["interval"], case["pcie"], work, agent_cpus)
    windows: dict[str, list[tuple[float, int, float]]] = {"off": [], "on": []}
    clocks: dict[str, list] = {"off": [], "on": []}

    def start_agent():
        agent.start()
        deadline = time.monotonic() + 30
        while not agent.ready():  # the workload keeps running while the agent starts
            if time.monotonic() > deadline:
                raise SystemExit(f"agent_overhead: the agent did not start:\n{agent.tail()}")
            run_for(step, 0.05)

    try:
        if toggle == "stop":
            start_agent()
            run_for(step, 1.0)  # past its start: the first samples, the first collection
        for i in range(2 * case["cycles"] + 1):
            on = i % 2 == 1
            if toggle == "stop":
                agent.resume() if on else agent.pause()
            elif on:
                start_agent()
            else:
                agent.stop()
            run_for(step, skip)
            windows["on" if on else "off"].append(measure(step, window - skip, stall_s))
            clocks["on" if on else "off"].append(sm_clock())
            if on and not agent.alive():
                raise SystemExit(f"agent_overhead: the agent died during a window:\n{agent.tail()}")
    finally:
        agent.stop()
    off, on = [w[0] for w in windows["off"]], [w[0] for w in windows["on"]]
    measured = window - skip

    def stalls(kind: str) -> tuple[float, float]:  # per second: long steps, and ms beyond the threshold
        ws = windows[kind]
        return (round(sum(w[1] for w in ws) / (measured * len(ws)), 2),
                round(1000 * sum(w[2] for w in ws) / (measured * len(ws)), 3))

    (stalls_off, stall_ms_off), (stalls_on, stall_ms_on) = stalls("off"), stalls("on")
    return {**case, "toggle": toggle, "steps_per_s_off": [round(x, 2) for x in off],
            "steps_per_s_on": [round(x, 2) for x in on], **overhead_stats(off, on),
            "sm_mhz_off": clocks["off"], "sm_mhz_on": clocks["on"],
            "stall_threshold_ms": stall_s * 1000,
            "stalls_per_s_off": stalls_off, "stalls_per_s_on": stalls_on,
            "stall_ms_per_s_off": stall_ms_off, "stall_ms_per_s_on": stall_ms_on,
            "stall_overhead_pct": round((stall_ms_on - stall_ms_off) / 10, 3)}


def overhead_stats(off: list[float], on: list[float]) -> dict:
    """The overhead figures of one case from its windows' steps/s (off, on, off, ..., on, off:
    one more off-window than on-windows). Each on-window is paired with the mean of the
    off-windows either side."""
    if len(off) != len(on) + 1 or not on:
        raise ValueError(f"{len(off)} off-windows and {len(on)} on-windows: expected one more off than on")
    around = [(off[i] + off[i + 1]) / 2 for i in range(len(on))]
    pairs = [1 - o / a for o, a in zip(on, around)]
    # The mean overhead is the ratio of means, 1 - sum(on) / sum(off either side): the mean of the
    # per-pair ratios is biased low by the windows' noise (E[on/off] > 1 when off is noisy; -0.3 to
    # -0.4% in an A/A run with 12% of noise per window). Its interval: Student's t on the pairs'
    # differences, each divided by the mean off-rate; neighbouring pairs share an off-window,
    # which correlates them (by 1/6 under white noise): the lag-1 term widens it accordingly.
    off_mean = statistics.fmean(around)
    mean, mean_half = mean_ci95([(a - o) / off_mean for o, a in zip(on, around)], lag1=True)
    _, median_lo, median_hi = median_ci95(pairs)
    many = len(pairs) > 1
    return {"median_off": round(statistics.median(off), 2), "median_on": round(statistics.median(on), 2),
            "overhead_of_medians_pct": round(100 * (1 - statistics.median(on) / statistics.median(off)), 3),
            "pair_deltas_pct": [round(100 * d, 3) for d in pairs],
            "pair_delta_quartiles_pct": [round(100 * q, 3) for q in statistics.quantiles(pairs, n=4)] if many else None,
            "pair_delta_stdev_pct": round(100 * statistics.stdev(pairs), 3) if many else None,
            "overhead_pct": round(100 * statistics.median(pairs), 3),
            "overhead_median_ci95_pct": [round(100 * median_lo, 3), round(100 * median_hi, 3)],
            "overhead_mean_pct": round(100 * mean, 3),
            "overhead_sem_pct": round(100 * mean_half / 1.96, 3) if many else None,
            "overhead_mean_ci95_pct": [round(100 * (mean - mean_half), 3), round(100 * (mean + mean_half), 3)],
            "overhead_mean_of_pair_ratios_pct": round(100 * statistics.fmean(pairs), 3),
            "pairs_slower": sum(d > 0 for d in pairs),
            "off_spread_pct": round(100 * (max(off) - min(off)) / statistics.median(off), 3)}


def parse_case(text: str, default_cycles: int) -> dict:
    case = {"name": "", "agent": "checkout", "interval": 0.1, "workload": "launch", "cycles": default_cycles,
            "pcie": False}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in case:
            raise SystemExit(f"agent_overhead: --case {text!r}: keys are {', '.join(case)}")
        key = key.strip()
        case[key] = (float(value) if key == "interval" else int(value) if key == "cycles"
                     else value.strip() in ("1", "true", "yes") if key == "pcie" else value.strip())
    case["name"] = case["name"] or f"{case['agent']}@{case['interval']}s/{case['workload']}"
    return case


def cuda_reason() -> str:
    try:
        import torch  # optional: its absence is the reason this returns
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to PyTorch"
    return ""


def report(facts: dict, latencies: list[dict], results: list[dict]) -> str:
    lines = []
    if "gpus" in facts:
        lines.append(f"GPU: {facts['gpus']} x {facts['gpu_name']}, driver {facts['driver']}, "
                     f"PCIe byte counters: {'yes' if facts.get('pcie_byte_counters') else 'no'}")
    if latencies:
        lines.append(f"{'NVML call (GPU 0)':42} {'median us':>10} {'p90 us':>10} {'n':>5}")
        for r in latencies:
            if "error" in r:
                lines.append(f"{r['call']:42} {'error: ' + r['error']}")
            else:
                lines.append(f"{r['call']:42} {r['median_us']:>10} {r['p90_us']:>10} {r['n']:>5}")
    if results:
        lines.append(f"{'case':26} {'off steps/s':>11} {'on steps/s':>10} {'median':>8} {'[95% CI]':>16} "
                     f"{'mean':>7} {'[95% CI]':>16} {'slower':>9} {'stalls/s off/on':>16} {'stall ms/s off/on':>18}")
        for r in results:
            med_ci = "[{:+.2f}, {:+.2f}]".format(*r["overhead_median_ci95_pct"])
            mean_ci = "[{:+.2f}, {:+.2f}]".format(*r["overhead_mean_ci95_pct"])
            lines.append(f"{r['name']:26} {r['median_off']:>11} {r['median_on']:>10} {r['overhead_pct']:>+7.2f}% "
                         f"{med_ci:>16} {r['overhead_mean_pct']:>+6.2f}% {mean_ci:>16} "
                         f"{r['pairs_slower']:>4}/{len(r['pair_deltas_pct']):<4} "
                         f"{r['stalls_per_s_off']:>7}/{r['stalls_per_s_on']:<8} "
                         f"{r['stall_ms_per_s_off']:>8}/{r['stall_ms_per_s_on']:<9}")
    return "\n".join(lines)


def recompute(path: Path) -> int:
    data = json.loads(path.read_text())
    results = [{**case, **overhead_stats(case["steps_per_s_off"], case["steps_per_s_on"])}
               for case in data["cases"]]
    print(report(data.get("host", {}), [], results))
    return 0


def main(argv: list[str] | None = None) -> int:
    """The bench's command line: parse the arguments, then a hidden probe mode, --recompute, or the
    NVML table and each case in turn, saving the JSON after each case. One function on purpose: it
    reads top to bottom as the run's script, and its steps share the parsed arguments, the host facts
    and the results list that the nested save() writes, which split functions would only pass around."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", action="append", default=[], help="name=..,interval=..,workload=..,cycles=..,agent=..")
    p.add_argument("--toggle", choices=("stop", "restart"), default="stop",
                   help="stop: the agent runs throughout and is frozen (SIGSTOP) in the off-windows, so "
                        "windows can be short and many; restart: started and stopped per window (default stop)")
    p.add_argument("--window", type=float, help="seconds per window (default 1 with stop, 8 with restart)")
    p.add_argument("--skip", type=float,
                   help="seconds not counted at each window's start (default 0 with stop, 1 with restart)")
    p.add_argument("--cycles", type=int, help="on-windows per case (default 30 with stop, 6 with restart)")
    p.add_argument("--stall-ms", type=float, default=2.0,
                   help="a step longer than this counts as a stall (default 2 ms)")
    p.add_argument("--workload-cpu", type=int,
                   help="pin the workload to this CPU; the agent keeps the others and places itself "
                        "(default: no pinning)")
    p.add_argument("--warmup", type=float, default=3.0,
                   help="seconds the workload runs, unmeasured, before each case (default 3)")
    p.add_argument("--no-latency", action="store_true", help="skip the NVML call latencies")
    p.add_argument("--latency-n", type=int, default=200, help="calls per NVML call type (default 200)")
    p.add_argument("--latency-budget", type=float, default=2.0, help="at most this many seconds per call type")
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--recompute", metavar="JSON",
                   help="print the figures of an earlier --json run again, from its windows, with this "
                        "version's statistics; nothing is measured")
    p.add_argument("--probe-pcie", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe-idle", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe_pcie:
        return probe_pcie()
    if args.probe_idle:
        return probe_idle()
    if args.recompute:
        return recompute(Path(args.recompute))
    stop_mode = args.toggle == "stop"
    args.window = args.window or (1.0 if stop_mode else 8.0)
    args.skip = args.skip if args.skip is not None else (0.0 if stop_mode else 1.0)
    args.cycles = args.cycles or (30 if stop_mode else 6)
    cases = [parse_case(c, args.cycles) for c in args.case] or [
        parse_case(c, args.cycles) for c in ("interval=0.1,workload=launch", "interval=0.01,workload=launch",
                                             "interval=0.1,workload=gpu")]
    agent_cpus = pin_workload(args.workload_cpu)  # before torch starts its threads: they inherit it
    facts, latencies = nvml_latencies(0 if args.no_latency else args.latency_n, args.latency_budget)
    facts.update(cpus=os.cpu_count(), python=platform.python_version(),
                 method={"toggle": args.toggle, "window_s": args.window, "skip_s": args.skip,
                         "stall_ms": args.stall_ms, "warmup_s": args.warmup,
                         "workload_cpu": args.workload_cpu,
                         "env": {k: os.environ[k] for k in ("CUDA_DEVICE_MAX_CONNECTIONS",) if k in os.environ}})
    results = []

    def save() -> None:  # after each case, so that a run cut short keeps what it measured
        if args.json:
            Path(args.json).write_text(json.dumps({"host": facts, "nvml_latency": latencies, "cases": results},
                                                  indent=1) + "\n")
    if reason := cuda_reason():
        print(f"agent_overhead: {reason}; the ABAB workload measurements are skipped")
    elif not facts:
        print("agent_overhead: the agent would have no GPU to sample; the ABAB workload measurements are skipped")
    else:
        import torch  # only once cuda_reason() found it and a GPU; the version goes into the facts
        facts["torch"] = torch.__version__
        for case in cases:
            with tempfile.TemporaryDirectory(prefix="agent-overhead-") as tmp:
                (Path(tmp) / "dumps").mkdir()
                result = run_case(case, args.toggle, args.window, args.skip, args.stall_ms / 1000, Path(tmp),
                                  args.warmup, agent_cpus, sm_clock_reader())
            results.append(result)
            save()
            print(f"{result['name']}: overhead {result['overhead_pct']}% (median of {len(result['pair_deltas_pct'])} "
                  f"per-pair deltas, 95% CI {result['overhead_median_ci95_pct']}; mean {result['overhead_mean_pct']} "
                  f"+- {result['overhead_sem_pct']} s.e., 95% CI {result['overhead_mean_ci95_pct']}), "
                  f"off {result['median_off']} on {result['median_on']} steps/s; stall ms/s off "
                  f"{result['stall_ms_per_s_off']} on {result['stall_ms_per_s_on']}; pair-delta quartiles "
                  f"{result['pair_delta_quartiles_pct']}, stdev {result['pair_delta_stdev_pct']}; off-window spread "
                  f"{result['off_spread_pct']}%", flush=True)
    text = report(facts, latencies, results)
    print(text)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
