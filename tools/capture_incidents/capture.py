"""Capture real GPU incidents (NCCL desyncs, peer OOM, CUDA-graph capture failures) for
tests/fixtures/h200_open_world, one folder per incident, as an on-call engineer collects them.

    python3 tools/capture_incidents/capture.py OUTDIR [incident ...]

Incidents (default: all, one after another; every process is killed after its deadline in INCIDENTS):
  nccl_op_mismatch_hang      2 ranks: at the same seq rank 0 calls all_reduce, rank 1 all_gather
  nccl_op_mismatch_detail    the same under TORCH_DISTRIBUTED_DEBUG=DETAIL
  nccl_peer_oom              2 ranks: rank 1 (memory fraction 0.05) OOMs right before an all_reduce
  kernel_fault_assert        2 ranks: rank 1 looks up a token id past the embedding table
  healthy_2rank              2 ranks: 8 steps of matmul + all_reduce, clean shutdown
  peer_went_past             2 ranks: at step 5 (seq 6) rank 1 takes a rank-dependent branch that skips
                             the all_reduce, logs steps 5..9 done, idles, destroys the process group and
                             exits 0; rank 0 waits in seq 6 until its watchdog fires
  peer_went_past_nodump      the same with the flight recorder off (TORCH_FR_BUFFER_SIZE=0,
                             TORCH_NCCL_DUMP_ON_TIMEOUT=0): only the logs show it
  peer_exception_first       2 ranks: rank 1's data loading raises "ValueError: batch 5 has 0 samples"
                             before the seq-6 all_reduce (exit 1); rank 0 times out on seq 6
  peer_killed_first          2 ranks: rank 1 is SIGKILLed (as the kernel OOM killer does) before the seq-6
                             all_reduce; rank 0 times out on seq 6
  capture_oom_process_cap    1 GPU: an allocation inside torch.cuda.graph capture exceeds the
                             per-process memory fraction
  capture_other_thread       1 GPU: a metrics thread calls .item() while the main thread captures
  capture_other_thread_sync  1 GPU: a timing thread calls torch.cuda.synchronize() during capture

Per incident folder: rankN.log (2-rank) or worker.log (1 GPU), each process's stdout+stderr with
NCCL_DEBUG=INFO and TORCH_CPP_LOG_LEVEL=INFO; nccl_trace_rank_N flight-recorder pickles where the
watchdog wrote them (TORCH_NCCL_DUMP_ON_TIMEOUT=1; TORCH_NCCL_ENABLE_TIMING left unset, as in most
deployments). Logs over GZIP_OVER bytes are gzipped. OUTDIR/_host holds manifest.json (versions,
exit codes, durations, the environment set), nvidia-smi -q, nvidia-smi topo -m, and PyTorch's own
flight-recorder analyzer output for each incident that has dumps.

The peer_* programs log through Python's logging module with its default date format
("2026-12-06 05:20:01,123 INFO train: rank 1: step 6 done"), as training scripts do, so their own
lines carry a full date while NCCL's and c10d's lines keep the year-less glog style.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends): the shared device hosts require it.
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

PG_TIMEOUT_S = 10          # short, so the timeout incidents end quickly
IDLE_S = 35                # a rank that is not stuck stays alive this long, so dump signals reach it
NUMEL = 1 << 20
GZIP_OVER = 200_000
SAFETY_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

# name -> (processes, deadline in seconds, extra environment)
INCIDENTS: dict[str, tuple[int, int, dict]] = {
    "nccl_op_mismatch_hang": (2, 70, {}),
    "nccl_op_mismatch_detail": (2, 45, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}),
    "nccl_peer_oom": (2, 70, {}),
    "kernel_fault_assert": (2, 70, {}),
    "healthy_2rank": (2, 45, {}),
    "peer_went_past": (2, 70, {}),
    "peer_went_past_nodump": (2, 70, {"TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}),
    "peer_exception_first": (2, 70, {}),
    "peer_killed_first": (2, 70, {}),
    "capture_oom_process_cap": (1, 45, {}),
    "capture_other_thread": (1, 45, {}),
    "capture_other_thread_sync": (1, 45, {}),
}


# ---------------------------------------------------------------- workers

def say(msg: str) -> None:
    print(time.strftime("%Y-%m-%d %H:%M:%S"), msg, flush=True)


class Ranked:
    """What every 2-rank program shares: a process group and a small training step."""

    def __init__(self, rank: int, port: int):
        import torch  # torch in the incident processes only: the driver imports none (see host_facts)
        import torch.distributed as dist  # with torch: the incident processes only
        self.torch, self.dist, self.rank = torch, dist, rank
        torch.cuda.set_device(rank)
        self.dev = torch.device("cuda", rank)
        dist.init_process_group("nccl", rank=rank, world_size=2, timeout=timedelta(seconds=PG_TIMEOUT_S),
                                init_method=f"tcp://127.0.0.1:{port}", device_id=self.dev)
        self.x = torch.randn(2048, 2048, device=self.dev)
        self.grad = torch.ones(NUMEL, device=self.dev)

    def steps(self, first: int, last: int) -> None:
        for i in range(first, last):
            y = self.x @ self.x
            self.grad.add_(y[0, 0] * 0)
            self.dist.all_reduce(self.grad)
            self.torch.cuda.synchronize()
            say(f"rank {self.rank}: step {i} done")

    def idle_then_exit(self, outdir: Path) -> None:
        """Stay alive so a peer's dump signal reaches this rank, then dump on demand if none was written."""
        say(f"rank {self.rank}: idle for {IDLE_S} s")
        time.sleep(IDLE_S)
        path = outdir / f"nccl_trace_rank_{self.rank}"
        if not path.exists():
            c10d = self.torch._C._distributed_c10d
            dump = getattr(c10d, "_dump_nccl_trace", None) or c10d._dump_fr_trace
            path.write_bytes(dump())
            say(f"rank {self.rank}: flight recorder dumped on demand")
        say(f"rank {self.rank}: exiting")
        os._exit(0)                                  # no destroy_process_group: it can hang after a timeout


def op_mismatch(rank: int, outdir: Path, port: int) -> None:
    r = Ranked(rank, port)
    r.steps(0, 5)
    if rank == 0:
        say("rank 0: step 5 all_reduce of the gradients")
        r.dist.all_reduce(r.grad)
    else:
        # the wrong branch: rank 1 thinks this step gathers metrics
        half = r.grad[: NUMEL // 2].contiguous()
        out = [r.torch.empty_like(half) for _ in range(2)]
        say("rank 1: step 5 all_gather of the metrics")
        r.dist.all_gather(out, half)
    r.torch.cuda.synchronize()
    say(f"rank {rank}: step 5 done")
    r.idle_then_exit(outdir)


def peer_oom(rank: int, outdir: Path, port: int) -> None:
    import torch  # the incident processes only (see host_facts)
    if rank == 1:
        torch.cuda.set_per_process_memory_fraction(0.05, rank)   # shares its GPU: capped at 5 %
    r = Ranked(rank, port)
    r.steps(0, 5)
    if rank == 1:
        say("rank 1: step 5 computing logits for batch 8 x 4096 tokens")
        logits = torch.empty((8, 4096, 128256), dtype=torch.float32, device=r.dev)   # 15.7 GiB
        r.grad.add_(logits[0, 0, 0] * 0)
    say(f"rank {rank}: step 5 all_reduce")
    r.dist.all_reduce(r.grad)
    torch.cuda.synchronize()
    say(f"rank {rank}: step 5 done")
    r.idle_then_exit(outdir)


def kernel_fault(rank: int, outdir: Path, port: int) -> None:
    import torch  # the incident processes only (see host_facts)
    r = Ranked(rank, port)
    table = torch.randn(32000, 256, device=r.dev)                # vocabulary of 32 000 tokens
    r.steps(0, 4)
    ids = torch.randint(0, 32000, (4096,), device=r.dev)
    if rank == 1:
        ids[17] = 32005                                          # a token id from a larger tokenizer
    say(f"rank {rank}: step 4 embedding lookup")
    emb = torch.nn.functional.embedding(ids, table)
    r.grad.add_(emb.sum() * 0)
    r.dist.all_reduce(r.grad)
    torch.cuda.synchronize()
    say(f"rank {rank}: step 4 done")
    r.idle_then_exit(outdir)


def healthy(rank: int, outdir: Path, port: int) -> None:
    r = Ranked(rank, port)
    r.steps(0, 8)
    c10d = r.torch._C._distributed_c10d
    dump = getattr(c10d, "_dump_nccl_trace", None) or c10d._dump_fr_trace
    (outdir / f"nccl_trace_rank_{rank}").write_bytes(dump())
    say(f"rank {rank}: flight recorder dumped on demand")
    r.dist.destroy_process_group()
    say(f"rank {rank}: done")


# ---- the peer_* incidents: one rank goes past, raises or is killed before seq 6; logging module lines

PEER_STEPS = 10            # steps of the peer_* programs; the bad one is step 5 (seq 6: steps 0..4 are seqs 1..5)
BAD_STEP = 5


def train_logger():
    """A training script's logger: Python logging's default date format (with the year), to stdout."""
    import logging
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return logging.getLogger("train")


def load_batch(rank: int, step: int, fail: bool) -> list:
    samples = [] if fail and rank == 1 and step == BAD_STEP else list(range(8))   # rank 1's shard ran dry
    if not samples:
        raise ValueError(f"batch {step} has 0 samples")
    return samples


def train_step(r: "Ranked", step: int, sync: bool) -> None:
    y = r.x @ r.x
    r.grad.add_(y[0, 0] * 0)
    if sync:
        r.dist.all_reduce(r.grad)
    r.torch.cuda.synchronize()


def peer_went_past(rank: int, outdir: Path, port: int) -> None:
    log = train_logger()
    r = Ranked(rank, port)
    for step in range(PEER_STEPS):
        # the bug: a rank-dependent branch (rank 1 thinks it is accumulating gradients from step 5 on)
        sync = not (rank == 1 and step >= BAD_STEP)
        train_step(r, step, sync)
        log.info(f"rank {rank}: step {step} done")
    log.info(f"rank {rank}: training finished after {PEER_STEPS} steps; idle for {IDLE_S} s")
    time.sleep(IDLE_S)                               # the peer's dump signal (if any) reaches this rank
    done = threading.Event()

    def destroy() -> None:
        r.dist.destroy_process_group()
        done.set()

    threading.Thread(target=destroy, daemon=True).start()
    if done.wait(15):
        log.info(f"rank {rank}: process group destroyed, exiting")
    else:
        log.info(f"rank {rank}: destroy_process_group did not return within 15 s, exiting")
    sys.stdout.flush()
    os._exit(0)                                      # exit 0 even where destroy_process_group still hangs


def peer_exception_first(rank: int, outdir: Path, port: int) -> None:
    log = train_logger()
    r = Ranked(rank, port)
    for step in range(PEER_STEPS):
        load_batch(rank, step, fail=True)            # rank 1, step 5: ValueError, uncaught (exit 1)
        train_step(r, step, True)
        log.info(f"rank {rank}: step {step} done")
    r.idle_then_exit(outdir)                         # not reached by either rank: rank 0 hangs in seq 6


def peer_killed_first(rank: int, outdir: Path, port: int) -> None:
    import signal
    log = train_logger()
    r = Ranked(rank, port)
    for step in range(PEER_STEPS):
        if rank == 1 and step == BAD_STEP:
            log.info(f"rank {rank}: step {step} loading batch")
            os.kill(os.getpid(), signal.SIGKILL)     # as the kernel's OOM killer ends a process: no message
        train_step(r, step, True)
        log.info(f"rank {rank}: step {step} done")
    r.idle_then_exit(outdir)                         # not reached by either rank: rank 0 hangs in seq 6


def capture_oom(rank: int, outdir: Path, port: int) -> None:
    import torch  # the incident processes only (see host_facts)
    torch.cuda.set_per_process_memory_fraction(0.02, 0)          # 2 % of the card
    w = torch.randn(4096, 4096, device="cuda")
    static_x = torch.randn(16384, 4096, device="cuda")          # 256 MiB
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                                   # warm-up, as the CUDA-graph docs say
        for _ in range(3):
            h = static_x @ w
    torch.cuda.current_stream().wait_stream(s)
    say("capturing the decode graph for batch 16384")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        h = static_x @ w
        wide = h.repeat(16, 1)                                  # 4 GiB in the graph's private pool
        out = wide.sum(0)
    say(f"captured; out {tuple(out.shape)}")


def capture_other_thread(rank: int, outdir: Path, port: int, sync: bool) -> None:
    import torch  # the incident processes only (see host_facts)
    w = torch.randn(1024, 1024, device="cuda") / 32
    static_x = torch.randn(64, 1024, device="cuda")
    counters = torch.zeros(8, device="cuda")
    stop = threading.Event()

    def poll() -> None:                                          # a metrics/timing thread, as servers run
        while not stop.is_set():
            if sync:
                torch.cuda.synchronize()
            else:
                counters.sum().item()
            time.sleep(0.001)

    threading.Thread(target=poll, name="metrics-poller", daemon=True).start()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            h = torch.tanh(static_x @ w)
    torch.cuda.current_stream().wait_stream(s)
    say("capturing the decode graph (3000 layers)")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        h = static_x
        for _ in range(3000):
            h = torch.tanh(h @ w)
    stop.set()
    g.replay()
    torch.cuda.synchronize()
    say(f"captured and replayed; h[0,0]={h[0, 0].item():.4f}")


def worker(incident: str, rank: int, outdir: Path, port: int) -> None:
    programs = {"nccl_op_mismatch_hang": op_mismatch, "nccl_op_mismatch_detail": op_mismatch,
                "nccl_peer_oom": peer_oom, "kernel_fault_assert": kernel_fault, "healthy_2rank": healthy,
                "peer_went_past": peer_went_past, "peer_went_past_nodump": peer_went_past,
                "peer_exception_first": peer_exception_first, "peer_killed_first": peer_killed_first,
                "capture_oom_process_cap": capture_oom,
                "capture_other_thread": lambda *a: capture_other_thread(*a, sync=False),
                "capture_other_thread_sync": lambda *a: capture_other_thread(*a, sync=True)}
    programs[incident](rank, outdir, port)


# ---------------------------------------------------------------- driver

def process_env(incident_dir: Path, extra: dict) -> dict:
    env = dict(os.environ, **SAFETY_ENV, NCCL_DEBUG="INFO", TORCH_CPP_LOG_LEVEL="INFO", PYTHONUNBUFFERED="1",
               TORCH_FR_BUFFER_SIZE="2000", TORCH_NCCL_DUMP_ON_TIMEOUT="1",
               TORCH_FR_DUMP_TEMP_FILE=str(incident_dir / "nccl_trace_rank_"), **extra)
    env.pop("TORCH_NCCL_ENABLE_TIMING", None)                  # the common default: no start/duration
    return env


def run_incident(incident: str, root: Path, port: int) -> dict:
    world, deadline, extra = INCIDENTS[incident]
    d = root / incident
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    procs, logs = [], []
    for rank in range(world):
        log = open(d / (f"rank{rank}.log" if world > 1 else "worker.log"), "wb")
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", incident, str(rank),
                                       str(d), str(port)], stdout=log, stderr=subprocess.STDOUT,
                                      env=process_env(d, extra)))
    codes: list = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1.0, deadline - (time.time() - t0))))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            codes.append(f"killed after {deadline} s")
    for log in logs:
        log.close()
    compress(d)
    return {"incident": incident, "processes": world, "exit_codes": codes, "seconds": round(time.time() - t0, 1),
            "extra_env": extra, "files": {p.name: p.stat().st_size for p in sorted(d.iterdir())}}


def compress(d: Path) -> None:
    for p in d.iterdir():
        if p.suffix == ".log" and p.stat().st_size > GZIP_OVER:
            with open(p, "rb") as fi, gzip.open(str(p) + ".gz", "wb", compresslevel=9) as fo:
                shutil.copyfileobj(fi, fo)
            p.unlink()


def analyze(root: Path, incident: str, host: Path) -> None:
    """PyTorch's own flight-recorder analyzer over the incident's dumps (outside the incident folder)."""
    dumps = sorted((root / incident).glob("nccl_trace_rank_*"))
    if not dumps:
        return
    tmp = host / f".fr_{incident}"
    tmp.mkdir()
    for p in dumps:
        shutil.copy(p, tmp / p.name)
    for flag, suffix in (([], "fr_trace.txt"), (["-j"], "fr_trace_j.txt")):
        try:
            res = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(tmp),
                                  "-p", "nccl_trace_rank_", *flag], capture_output=True, text=True, timeout=60)
            text = res.stdout + res.stderr
        except subprocess.TimeoutExpired:
            text = "analyzer timed out after 60 s\n"
        (host / f"{incident}.{suffix}").write_text(text)
    shutil.rmtree(tmp)


VERSIONS = ("import json, sys, torch; print(json.dumps({'python': sys.version.split()[0], "
            "'torch': torch.__version__, 'cuda': torch.version.cuda, "
            "'nccl': '.'.join(map(str, torch.cuda.nccl.version())), "
            "'gpus': [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]}))")


def host_facts(host: Path) -> dict:
    """Versions from a child process, so the driver holds no CUDA context while incidents run."""
    for args, name in ((["-q"], "nvidia-smi-q.txt"), (["topo", "-m"], "topo.txt")):
        res = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
        (host / name).write_text(res.stdout + res.stderr)
    res = subprocess.run([sys.executable, "-c", VERSIONS], capture_output=True, text=True, timeout=120)
    facts = json.loads(res.stdout) if res.returncode == 0 else {"error": res.stderr[-2000:]}
    facts["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                     capture_output=True, text=True).stdout.split()
    return facts


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--worker":
        worker(argv[1], int(argv[2]), Path(argv[3]), int(argv[4]))
        return 0
    root = Path(argv[0])
    chosen = argv[1:] or list(INCIDENTS)
    unknown = set(chosen) - set(INCIDENTS)
    if unknown:
        raise SystemExit(f"unknown incident(s) {sorted(unknown)}; known: {', '.join(INCIDENTS)}")
    host = root / "_host"
    host.mkdir(parents=True, exist_ok=True)
    common = {k: v for k, v in process_env(Path("OUTDIR/<incident>"), {}).items() if k not in os.environ
              or k in SAFETY_ENV}
    manifest = {"versions": host_facts(host), "env": common, "pg_timeout_s": PG_TIMEOUT_S, "incidents": []}
    for i, incident in enumerate(chosen):
        say(f"incident {incident}")
        manifest["incidents"].append(run_incident(incident, root, 29700 + i))
        analyze(root, incident, host)
        print(json.dumps(manifest["incidents"][-1]), flush=True)
        (host / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
