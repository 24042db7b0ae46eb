"""Whole-diagnosis benchmark: `tracedoc diagnose` end to end vs HolisticTraceAnalysis's load.

    python -m bench.bench_diagnose [--mb 150] [--skip-hta]

Builds two Kineto JSONs of at least --mb MB with bench.bench_kineto_parse.build_trace (the
corpus trace h200/healthy_decode tiled): as it is, and a variant whose two rarest kernels
have 5,160-character templated names (ROCm and CUTLASS kernels look like this). For each,
in the same run and each in a fresh subprocess:

* tracedoc: `tracedoc diagnose --format json FILE` (cli.main: detect, parse, align,
  features, rules, SLOs, clusters, report). Time: wall clock from starting the subprocess
  to the CLI's return (interpreter start and imports included; the bench reading the report
  back afterwards is not), and its CPU time. Memory: its VmHWM.
* HTA: `TraceAnalysis(trace_dir=...)`, the load alone (imports excluded), as in
  bench.bench_kineto_parse: wall clock, CPU time and VmHWM.

Ratios: HTA load / tracedoc diagnose, wall clock and CPU time (the CPU ratio moves less with
other work on a shared machine; target >= 10x), tracedoc peak RSS / JSON size
(target <= 2x), peak RSS with long names / without (target <= 1.1x: memory follows the
trace, not its longest name). Exit status 1 when a target is missed; the last line
(`SUMMARY: ...`) is the one-line result to paste.
"""
from __future__ import annotations

import argparse
import io
import json
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

from bench.bench_kineto_parse import _peak_rss_bytes, build_trace
from bench.bench_kineto_parse import run as run_loader

TARGET_SPEEDUP = 10.0
TARGET_RSS_OVER_SIZE = 2.0
TARGET_LONG_NAME_GROWTH = 1.1
LONG_NAME_CHARS = 5_160
LONG_NAMES = 2


def long_kernel_names(events: list[dict]) -> list[dict]:
    """The LONG_NAMES rarest kernels renamed to LONG_NAME_CHARS-character template names."""
    counts: dict[str, int] = {}
    for e in events:
        if e.get("cat") == "kernel":
            counts[e["name"]] = counts.get(e["name"], 0) + 1
    rare = sorted(counts, key=lambda n: (counts[n], n))[:LONG_NAMES]
    renamed = {n: _templated(n, LONG_NAME_CHARS) for n in rare}
    return [dict(e, name=renamed[e["name"]]) if e.get("cat") == "kernel" and e.get("name") in renamed else e
            for e in events]


def _templated(name: str, chars: int) -> str:
    arg = "ck::tensor_operation::element_wise::PassThrough, "
    body = (arg * (chars // len(arg) + 1))[:chars - len(name) - 2]
    return f"{name}<{body}>"


def worker(trace: Path) -> None:
    """Runs in a fresh interpreter: the CLI's diagnose, then seconds, peak RSS and what the
    report says as JSON (the report itself is kept off the terminal)."""
    started = time.perf_counter()
    from cli.main import main  # after the clock starts: the CLI's imports are part of what is timed
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["diagnose", "-q", "--format", "json", "--fail-on", "critical", str(trace)])
    seconds = time.perf_counter() - started
    ended = time.time()  # the parent's wall clock ends here: reading the report back below is the bench's
    usage = resource.getrusage(resource.RUSAGE_SELF)  # the whole process: start, imports, diagnose
    report = json.loads(out.getvalue())
    print(json.dumps({"seconds": seconds, "ended": ended, "cpu": usage.ru_utime + usage.ru_stime,
                      "peak_rss": _peak_rss_bytes(), "exit": code,
                      "events": report["trace"]["events"],
                      "findings": sorted(f["rule_id"] for f in report["findings"]),
                      "rule_errors": len(report["rule_errors"])}))


def run_tracedoc(trace: Path) -> dict:
    """Wall clock: from starting the process (interpreter start and imports included) to the
    CLI's return, on the machine's clock both processes read."""
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "bench.bench_diagnose", "--worker", str(trace)],
                          capture_output=True, text=True)
    if proc.returncode:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-3:]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall"] = result.pop("ended") - started
    return result


def measure(trace: Path, skip_hta: bool) -> dict:
    size = trace.stat().st_size
    ours = run_tracedoc(trace)
    hta = {"skipped": True} if skip_hta else run_loader("hta", trace)
    return {"size": size, "ours": ours, "hta": hta}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=150, help="minimum size of the tiled JSON (MB)")
    ap.add_argument("--skip-hta", action="store_true", help="tracedoc only (no HolisticTraceAnalysis)")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, transform in (("tiled", None), ("long names", long_kernel_names)):
            trace_dir = Path(tmp) / label.replace(" ", "_")
            trace_dir.mkdir()
            trace = trace_dir / "rank0.pt.trace.json"  # alone in its folder: HTA reads every file there
            build_trace(trace, args.mb, transform)
            if not results:  # once, unmeasured: the builtin rule pack's cache (rules/loader.py) and .pyc files
                run_tracedoc(trace)
            results[label] = measure(trace, args.skip_hta)
            trace.unlink()
    return report(results)


MIB = 1024**2


def report(results: dict) -> int:
    met, parts = True, []
    for label, r in results.items():
        print(f"{label}: Kineto JSON {r['size'] / MIB:,.1f} MiB")
        ok, part = _report_one(label, r["size"], r["ours"], r["hta"])
        met &= ok
        parts.append(part)
    tiled, long_ = results.get("tiled", {}).get("ours", {}), results.get("long names", {}).get("ours", {})
    if "peak_rss" in tiled and "peak_rss" in long_:
        growth = long_["peak_rss"] / tiled["peak_rss"]
        print(f"peak RSS with {LONG_NAME_CHARS:,}-character kernel names / without: {growth:.2f}x "
              f"(target <= {TARGET_LONG_NAME_GROWTH}x)")
        met &= growth <= TARGET_LONG_NAME_GROWTH
        parts.append(f"long names / tiled peak RSS {growth:.2f}x")
    print(f"SUMMARY: whole diagnose: {'; '.join(parts)}; targets (>= {TARGET_SPEEDUP:.0f}x HTA, "
          f"<= {TARGET_RSS_OVER_SIZE:.0f}x the JSON, long names <= {TARGET_LONG_NAME_GROWTH}x) "
          f"{'met' if met else 'NOT met'}")
    return 0 if met else 1


def _report_one(label: str, size: int, ours: dict, hta: dict) -> tuple[bool, str]:
    """Print one trace's figures; (targets met, its part of the summary line)."""
    if "error" in ours:
        print(f"  tracedoc diagnose: FAILED: {ours['error']}")
        return False, f"{label}: tracedoc FAILED"
    rss_ratio = ours["peak_rss"] / size
    print(f"  tracedoc diagnose: {ours['wall']:.2f} s (in-process {ours['seconds']:.2f} s, CPU {ours['cpu']:.2f} s), "
          f"peak RSS {ours['peak_rss'] / MIB:,.0f} MiB ({rss_ratio:.2f}x the JSON), {ours['events']:,} events, "
          f"findings {ours['findings']}, {ours['rule_errors']} rule errors")
    met = rss_ratio <= TARGET_RSS_OVER_SIZE
    part = (f"{label} {size / MIB:,.0f} MiB: tracedoc {ours['wall']:.2f} s, {ours['peak_rss'] / MIB:,.0f} MiB "
            f"({rss_ratio:.2f}x the JSON)")
    if "error" in hta:
        print(f"  HTA load: FAILED: {hta['error']}")
        return False, part + ", HTA FAILED"
    if hta.get("skipped"):
        return met, part
    speedup, cpu_ratio = hta["seconds"] / ours["wall"], hta["cpu"] / ours["cpu"]
    print(f"  HTA load: {hta['seconds']:.2f} s (CPU {hta['cpu']:.2f} s), peak RSS {hta['peak_rss'] / MIB:,.0f} MiB "
          f"({hta['peak_rss'] / size:.2f}x the JSON), {hta['events']:,} events")
    print(f"  speed-up (HTA load / whole tracedoc diagnose): {speedup:.1f}x wall clock, {cpu_ratio:.1f}x CPU time "
          f"(target >= {TARGET_SPEEDUP:.0f}x); memory HTA/tracedoc {hta['peak_rss'] / ours['peak_rss']:.1f}x")
    part += (f" vs HTA load {hta['seconds']:.2f} s, {hta['peak_rss'] / MIB:,.0f} MiB: {speedup:.1f}x "
             f"({cpu_ratio:.1f}x CPU)")
    return met and speedup >= TARGET_SPEEDUP, part


if __name__ == "__main__":
    sys.exit(main())
