"""Capture real multi-rank NCCL incidents, one process per GPU, for tests/fixtures/nccl_multirank.

    python3 tools/capture_nccl/capture.py OUTDIR [incident ...]

Incidents (default: all, one after another, each bounded by DEADLINE_S):
  peer_missing         rank 1 skips one all_reduce; rank 0 waits for it and its watchdog times out
  collective_mismatch  both ranks call all_reduce seq 7, rank 1 with half the elements
  straggler            rank 1 sleeps STRAGGLE_S on the host before step 5's all_reduce
  healthy              the same loop, nobody late

Each incident folder holds, per rank: rankN.log (NCCL_DEBUG=INFO and c10d logs, stdout+stderr),
nccl_trace_rank_N (flight-recorder pickle: written by the watchdog on timeout, else dumped on
demand at the end), kineto_rankN.json.gz (torch.profiler over the warm-up/steps), plus
nvml_samples.jsonl (pynvml, 10 Hz, every GPU; the fields of the corpus's h200/nvml samples).
Everything is gzipped at the end except the flight-recorder pickles, which are small.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends): the device hosts require it.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pynvml as N
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

WORLD = 2
PG_TIMEOUT_S = 10          # short, so the timeout incidents end quickly
DEADLINE_S = 110           # per incident: every rank is killed after this
STRAGGLE_S = 2.0
STEPS = 8
STRAGGLE_STEP = 5          # the all_reduce of this step waits for the late rank
NUMEL = 1 << 20
INCIDENTS = ("peer_missing", "collective_mismatch", "straggler", "healthy")
SAFETY_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


# ---------------------------------------------------------------- worker (one per rank)

def worker(incident: str, rank: int, outdir: Path, port: int) -> None:
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD, timeout=timedelta(seconds=PG_TIMEOUT_S),
                            init_method=f"tcp://127.0.0.1:{port}", device_id=dev)
    x = torch.randn(2048, 2048, device=dev)
    grad = torch.ones(NUMEL, device=dev)

    def step(i: int) -> None:
        y = x @ x                                   # some compute before the collective
        grad.add_(y[0, 0] * 0)
        if incident == "straggler" and rank == 1 and i == STRAGGLE_STEP:
            time.sleep(STRAGGLE_S)                  # host-side delay: rank 1 arrives late
        dist.all_reduce(grad)

    acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with profile(activities=acts) as prof:
        steps = STEPS if incident in ("straggler", "healthy") else 5
        for i in range(steps):
            step(i)
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(outdir / f"kineto_rank{rank}.json"))
    print(f"rank {rank}: {steps} steps done, trace written", flush=True)

    if incident == "peer_missing":
        # seq 6: rank 0 calls all_reduce, rank 1 never does (rank-dependent control flow)
        if rank == 0:
            dist.all_reduce(grad)
            print("rank 0: all_reduce enqueued, waiting for rank 1", flush=True)
            torch.cuda.synchronize()                # returns once the watchdog aborts the communicator
        else:
            print("rank 1: skipping the all_reduce", flush=True)
            time.sleep(PG_TIMEOUT_S + 25)           # stay alive so rank 0's dump signal reaches us
    elif incident == "collective_mismatch":
        # seq 6 is fine, seq 7 disagrees on the element count
        dist.all_reduce(grad)
        n = NUMEL if rank == 0 else NUMEL // 2
        work = dist.all_reduce(grad[:n].clone(), async_op=True)
        print(f"rank {rank}: all_reduce of {n} elements enqueued", flush=True)
        t0 = time.time()
        while not work.is_completed() and time.time() - t0 < PG_TIMEOUT_S + 25:
            time.sleep(0.2)
        print(f"rank {rank}: completed={work.is_completed()}", flush=True)
    _dump_flight_recorder(outdir / f"nccl_trace_rank_{rank}")
    print(f"rank {rank}: done", flush=True)
    sys.stdout.flush()
    os._exit(0)                                     # no destroy_process_group: it can hang after a timeout


def _dump_flight_recorder(path: Path) -> None:
    """On-demand dump, unless the watchdog already wrote one on timeout (that one wins)."""
    if path.exists():
        return
    c10d = torch._C._distributed_c10d
    dump = getattr(c10d, "_dump_nccl_trace", None) or c10d._dump_fr_trace
    path.write_bytes(dump())


# ---------------------------------------------------------------- driver

def nvml_sampler(path: Path, stop: threading.Event, hz: float = 10) -> None:
    N.nvmlInit()
    handles = [N.nvmlDeviceGetHandleByIndex(i) for i in range(WORLD)]
    with open(path, "w") as f:
        while not stop.is_set():
            for gpu, h in enumerate(handles):
                rec = {"ts_ns": time.time_ns(), "gpu": gpu}
                try:
                    u = N.nvmlDeviceGetUtilizationRates(h)
                    m = N.nvmlDeviceGetMemoryInfo(h)
                    rec.update(util_gpu=u.gpu, util_mem=u.memory, mem_used=m.used, mem_free=m.free, mem_total=m.total)
                    rec["power_mw"] = N.nvmlDeviceGetPowerUsage(h)
                    rec["temp_c"] = N.nvmlDeviceGetTemperature(h, N.NVML_TEMPERATURE_GPU)
                    rec["sm_clock_mhz"] = N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM)
                    rec["mem_clock_mhz"] = N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_MEM)
                    rec["throttle_reasons"] = N.nvmlDeviceGetCurrentClocksEventReasons(h)
                    rec["pcie_tx_kbs"] = N.nvmlDeviceGetPcieThroughput(h, N.NVML_PCIE_UTIL_TX_BYTES)
                    rec["pcie_rx_kbs"] = N.nvmlDeviceGetPcieThroughput(h, N.NVML_PCIE_UTIL_RX_BYTES)
                    procs = N.nvmlDeviceGetComputeRunningProcesses(h)
                    rec["procs"] = [{"pid": p.pid, "used": p.usedGpuMemory} for p in procs]
                except Exception as e:  # keep sampling; record the failure
                    rec["error"] = repr(e)
                f.write(json.dumps(rec) + "\n")
            stop.wait(1.0 / hz)
    N.nvmlShutdown()


def rank_env(incident_dir: Path) -> dict:
    return dict(os.environ, **SAFETY_ENV,
                NCCL_DEBUG="INFO", TORCH_CPP_LOG_LEVEL="INFO", PYTHONUNBUFFERED="1",
                TORCH_FR_BUFFER_SIZE="2000", TORCH_NCCL_TRACE_BUFFER_SIZE="2000",
                TORCH_NCCL_DUMP_ON_TIMEOUT="1", TORCH_NCCL_ENABLE_TIMING="1",
                TORCH_FR_DUMP_TEMP_FILE=str(incident_dir / "nccl_trace_rank_"),
                TORCH_NCCL_DEBUG_INFO_TEMP_FILE=str(incident_dir / "nccl_trace_rank_"),
                TORCH_NCCL_ASYNC_ERROR_HANDLING="1", TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC="8000")


def run_incident(incident: str, root: Path, port: int) -> dict:
    d = root / incident
    d.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    sampler = threading.Thread(target=nvml_sampler, args=(d / "nvml_samples.jsonl", stop), daemon=True)
    sampler.start()
    t0 = time.time()
    procs, logs = [], []
    for rank in range(WORLD):
        log = open(d / f"rank{rank}.log", "wb")
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", incident, str(rank),
                                       str(d), str(port)], stdout=log, stderr=subprocess.STDOUT, env=rank_env(d)))
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1.0, DEADLINE_S - (time.time() - t0))))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(f"killed after {DEADLINE_S} s")
    for log in logs:
        log.close()
    time.sleep(0.5)
    stop.set()
    sampler.join(5)
    compress(d)
    return {"incident": incident, "exit_codes": codes, "seconds": round(time.time() - t0, 1),
            "files": sorted(p.name for p in d.iterdir())}


def compress(d: Path) -> None:
    for p in d.iterdir():
        if p.suffix in (".log", ".json", ".jsonl"):
            with open(p, "rb") as fi, gzip.open(str(p) + ".gz", "wb", compresslevel=9) as fo:
                shutil.copyfileobj(fi, fo)
            p.unlink()


def versions() -> dict:
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--worker":
        worker(argv[1], int(argv[2]), Path(argv[3]), int(argv[4]))
        return 0
    root = Path(argv[0])
    chosen = argv[1:] or list(INCIDENTS)
    unknown = set(chosen) - set(INCIDENTS)
    if unknown:
        raise SystemExit(f"unknown incident(s) {sorted(unknown)}; known: {', '.join(INCIDENTS)}")
    manifest = {"versions": versions(), "env": SAFETY_ENV, "incidents": []}
    for i, incident in enumerate(chosen):
        print(time.strftime("%H:%M:%S"), "incident", incident, flush=True)
        manifest["incidents"].append(run_incident(incident, root, 29600 + i))
        print(json.dumps(manifest["incidents"][-1]), flush=True)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
