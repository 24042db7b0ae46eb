"""Text-log parsing speed: the line prefilter against the same parse with it turned off.

Builds big logs by tiling real ones (the shared corpus logs and tests/fixtures/open_world):
an NCCL INFO log (every NCCL INFO line we hold, repeated) and a mixed log (every line of every
log, repeated), parses each with the prefilter on and off in the same run, checks the events
are identical, and prints the ratio, with `grep -c` over the file as the floor of reading it.

    .venv/bin/python bench/bench_logs.py [--lines 100000] [--target 10]

Exits 1 when the NCCL INFO ratio misses the target (or the events differ).
"""
from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from ingest.engine.events import EventSink, ParseReport  # noqa: E402
from ingest.engine.parsers.logs import lines as log_lines  # noqa: E402
from ingest.engine.parsers.logs import parser as log  # noqa: E402

SOURCES = (ROOT.parent / "shared" / "corpus" / "public" / "logs", ROOT / "tests" / "fixtures" / "open_world")


def real_lines() -> list[str]:
    lines: list[str] = []
    for folder in SOURCES:
        for path in sorted(folder.rglob("*.log")):
            lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines


def tiled(lines: list[str], n: int, path: Path) -> Path:
    path.write_text("\n".join(itertools.islice(itertools.cycle(lines), n)) + "\n", encoding="utf-8")
    return path


def parse(path: Path) -> tuple[float, pa.Table]:
    batches: list[pa.RecordBatch] = []
    sink, report = EventSink("bench", log.SOURCE, batches.append), ParseReport(format=log.FORMAT)
    start = time.perf_counter()
    log.parse(path, sink, report, year=2025)
    sink.flush()
    return time.perf_counter() - start, pa.Table.from_batches(batches)


def grep_floor(path: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["grep", "-c", "NCCL", str(path)], capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--target", type=float, default=10.0)
    args = ap.parse_args()
    lines = real_lines()
    nccl = [line for line in lines if "NCCL INFO" in line]
    parse(tiled(lines[:50], 50, Path(tempfile.mkdtemp()) / "warm.log"))  # imports out of the timings
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for label, source in (("NCCL INFO log", nccl), ("mixed log", lines)):
            path = tiled(source, args.lines, Path(tmp) / f"{label.split()[0]}.log")
            on_s, on = parse(path)
            with log_lines.prefilter_disabled():
                off_s, off = parse(path)
            floor = grep_floor(path)
            same = on.equals(off)
            ratio = off_s / on_s
            print(f"{label}: {args.lines:,} lines ({len(source):,} real lines tiled), {path.stat().st_size / 1e6:.1f} MB")
            print(f"  prefilter on  {on_s:7.2f} s  {on_s / args.lines * 1e6:6.1f} us/line")
            print(f"  prefilter off {off_s:7.2f} s  {off_s / args.lines * 1e6:6.1f} us/line   speed-up {ratio:.1f}x")
            print(f"  grep -c floor {floor:7.3f} s   parse/grep {on_s / floor:.0f}x   events {on.num_rows:,} "
                  f"{'identical' if same else 'DIFFER'}")
            failed |= not same or (label.startswith("NCCL") and ratio < args.target)
    if failed:
        print(f"FAILED: target {args.target:g}x on the NCCL INFO log, identical events")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
