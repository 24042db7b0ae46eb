"""Kineto parse benchmark: tracedoc's parse_artifact (to Parquet) vs HolisticTraceAnalysis.

    python -m bench.bench_kineto_parse [--mb 150]

Builds, in a temp dir, a Kineto JSON of at least --mb MB by tiling
h200/healthy_decode/kineto_trace.json.gz (each copy shifted in time, correlation ids and
external ids shifted so launches still pair), then runs each loader in its own subprocess
and reads its peak RSS (ru_maxrss of the process and its children).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import orjson

from tests.corpus import corpus

SOURCE = ("h200", "healthy_decode", "kineto_trace.json.gz")
TARGET_SPEEDUP = 5.0
TARGET_RSS_OVER_SIZE = 2.0


def build_trace(out: Path, min_mb: float, transform: Callable[[list[dict]], list[dict]] | None = None,
                rank: int = 0, world_size: int = 1, kineto_layout: bool = False) -> int:
    """Tile the source trace until the JSON is at least min_mb MB; returns its size.
    `transform` may rewrite the source's events once, before tiling (e.g. long kernel names);
    `rank`/`world_size` name one rank's file of a multi-rank trace; `kineto_layout`: each event
    laid out on indented lines as libkineto writes it (real traces: fewer events per MB, and
    their args carry that white space), else compact JSON."""
    dump = _kineto_layout if kineto_layout else orjson.dumps
    from ingest.engine.io import read_all  # no pyarrow in importers: bench_service's driver, bench_diagnose's timed worker
    doc = orjson.loads(read_all(corpus(*SOURCE)))
    events = doc.pop("traceEvents")
    if transform is not None:
        events = transform(events)
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000.0
    corr_span = 1 + max((e.get("args", {}).get("correlation", 0) for e in events), default=0)
    ext_span = 1 + max((e.get("args", {}).get("External id", 0) for e in events), default=0)
    one_copy = sum(len(dump(e)) + 1 for e in events)
    copies = max(1, -(-int(min_mb * 1024**2) // one_copy))
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}  # HTA needs a rank
    with open(out, "wb") as f:
        head = orjson.dumps(doc)
        f.write(head[:-1] + b',"traceEvents":[')
        for k in range(copies):
            for i, e in enumerate(events if k == 0 else (_shift(e, k, span, corr_span, ext_span)
                                                          for e in events)):
                if k or i:
                    f.write(b",")
                f.write(dump(e))
        f.write(b"]}")
    return out.stat().st_size


def _kineto_layout(e: dict) -> bytes:
    """One event as libkineto's JSON writer lays it out: the keys on indented lines, the args
    in a block of their own."""
    head = ", ".join(f'"{k}": {orjson.dumps(v).decode()}' for k, v in e.items() if k != "args")
    args = e.get("args")
    if args is None:
        return f"\n  {{\n    {head}\n  }}".encode()
    inner = ", ".join(f'{orjson.dumps(k).decode()}: {orjson.dumps(v).decode()}' for k, v in args.items())
    return f'\n  {{\n    {head},\n    "args": {{\n      {inner}\n    }}\n  }}'.encode()


def _shift(e: dict, k: int, span: float, corr_span: int, ext_span: int) -> dict:
    e = dict(e)
    if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M":
        e["ts"] = e["ts"] + k * span
    if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
        e["id"] = e["id"] + k * corr_span
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        if isinstance(args.get("correlation"), int):
            args["correlation"] += k * corr_span
        if isinstance(args.get("External id"), int):
            args["External id"] += k * ext_span
        e["args"] = args
    return e


def _peak_rss_bytes() -> int:
    """Peak RSS of this process and its children. VmHWM, not ru_maxrss: Linux carries
    ru_maxrss across exec, so it would report the parent's peak (building the trace)."""
    with open("/proc/self/status") as f:
        self_kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    children_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(self_kb, children_kb) * 1024  # Linux reports KiB


def worker(which: str, trace: Path) -> None:
    """Runs in a fresh interpreter: load, then print seconds and peak RSS as JSON."""
    if which == "ours":
        from ingest.engine import process_memory
        from ingest.engine.parse import parse_artifact  # pyarrow: this worker only (see build_trace)
        process_memory.settle()  # as a worker's pool child does (tracedoc/celery.py) and the CLI
        started = time.perf_counter()
        report = parse_artifact(trace, trace.with_suffix(".parquet"), "bench")
        seconds, events = time.perf_counter() - started, report.events
    else:
        from hta.trace_analysis import TraceAnalysis  # hta (the bench extra): only in the HTA worker
        started, cpu = time.perf_counter(), time.process_time()
        analysis = TraceAnalysis(trace_dir=str(trace.parent))
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        events = sum(len(df) for df in analysis.t.traces.values())
        print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_rss": _peak_rss_bytes(), "events": events}))
        return
    print(json.dumps({"seconds": seconds, "peak_rss": _peak_rss_bytes(), "events": events}))


def run(which: str, trace: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.bench_kineto_parse", "--worker", which,
                           str(trace)], capture_output=True, text=True)
    if proc.returncode:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=150, help="minimum size of the tiled JSON (MB)")
    ap.add_argument("--worker", choices=("ours", "hta"), help=argparse.SUPPRESS)
    ap.add_argument("trace", nargs="?", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.trace)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = Path(tmp) / "traces"
        trace_dir.mkdir()
        trace = trace_dir / "rank0.pt.trace.json"
        size = build_trace(trace, args.mb)
        print(f"tiled Kineto JSON: {size / 1024**2:,.1f} MiB ({trace.name})")
        ours = run("ours", trace)
        trace.with_suffix(".parquet").unlink(missing_ok=True)  # HTA reads every file in the dir
        hta = run("hta", trace)
    _print("tracedoc parse_artifact -> Parquet", ours)
    _print("HolisticTraceAnalysis load", hta)
    if "error" in ours or "error" in hta:
        print("SUMMARY: Kineto parse benchmark FAILED (see above)")
        return 1
    speedup = hta["seconds"] / ours["seconds"]
    rss_ratio = ours["peak_rss"] / size
    met = speedup >= TARGET_SPEEDUP and rss_ratio <= TARGET_RSS_OVER_SIZE
    print(f"speed-up vs HTA: {speedup:.1f}x (target >= {TARGET_SPEEDUP:.0f}x)")
    print(f"peak RSS: ours {rss_ratio:.2f}x the JSON size (target <= {TARGET_RSS_OVER_SIZE:.0f}x), "
          f"HTA {hta['peak_rss'] / size:.2f}x; HTA/ours {hta['peak_rss'] / ours['peak_rss']:.1f}x")
    mib = 1024**2
    print(f"SUMMARY: Kineto JSON {size / mib:,.1f} MiB: tracedoc {ours['seconds']:.2f} s, "
          f"{ours['peak_rss'] / mib:,.0f} MiB peak RSS ({rss_ratio:.2f}x the JSON) vs HTA "
          f"{hta['seconds']:.2f} s, {hta['peak_rss'] / mib:,.0f} MiB: {speedup:.1f}x faster, "
          f"{hta['peak_rss'] / ours['peak_rss']:.1f}x less memory; targets "
          f"(>= {TARGET_SPEEDUP:.0f}x, <= {TARGET_RSS_OVER_SIZE:.0f}x the JSON) {'met' if met else 'NOT met'}")
    return 0 if met else 1


def _print(label: str, result: dict) -> None:
    if "error" in result:
        print(f"{label}: FAILED: {result['error']}")
        return
    print(f"{label}: {result['seconds']:.2f} s, peak RSS {result['peak_rss'] / 1024**2:,.0f} MiB, "
          f"{result['events']:,} events")


if __name__ == "__main__":
    sys.exit(main())
