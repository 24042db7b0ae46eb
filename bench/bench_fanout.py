"""Fan-out benchmark: one big trace diagnosed through the real web app, Celery, Redis and
PostgreSQL by 1, 2 and 4 worker processes.

    python -m bench.bench_fanout [--gb 0.05] [--part-mb 8] [--workers 1,2,4] [--kineto-ranks R]

The trace is one text log of --gb GB made by tiling the corpus's public logs (every line of
them is a diagnostic message: NCCL watchdogs, tracebacks, OOM reports, the slowest text the
log parser reads), or with --kineto-ranks R a multi-rank profiler trace: R Kineto JSON files
of --gb / R GB each, tiled from the corpus's healthy decode trace (bench_kineto_parse), one
part per rank's file. Each case starts a throwaway stack of its own (tests/support/stack.py: a new
PostgreSQL database, its own Redis queue names, storage in a temp dir, gunicorn, and N Celery
workers with the solo pool, one process each, consuming every queue), uploads the file
through the API and polls until the trace is done:

* `single`: one worker, fan-out off (TRACEDOC_FANOUT_BYTES=0): the parse as before;
* `N workers`: fan-out on for any size, the log cut in --part-mb MB ranges
  (TRACEDOC_FANOUT_PART_BYTES), each warmed up on --warmup-kb before it (default 1/16 of
  a range, the ratio of the defaults; the merge's whole-file fallbacks are counted).

Printed per case: wall clock from the upload's start to the report in hand, the server's own
parse time (state history: parsing -> parsed, the merge included) and diagnosis time, the
speed-up of the parse and of the whole against `single`, and each worker process's peak RSS
(VmHWM; the one that ran the diagnosis holds the whole trace's events and is listed apart
from those that only parsed). Every case must give the same event and finding counts as
`single`. The last line (`SUMMARY: ...`) is the result to paste. On a 2-core machine the
parse cannot go faster than 2x whatever the number of workers.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import requests

from bench.bench_kineto_parse import build_trace
from tests.corpus import CORPUS
from tests.support.stack import add_workers, reachable, running_stack

REDIS = "redis://127.0.0.1:6379/0"
POLL_S = 0.5


@dataclass
class Case:
    label: str
    workers: int
    wall_s: float
    parse_s: float
    diagnose_s: float
    events: int
    findings: int
    parse_rss_mib: list[float]
    diagnose_rss_mib: float
    fallbacks: int  # logs the merge parsed whole because their ranges did not join up


def build_log(path: Path, size: int) -> int:
    tile = b"".join(p.read_bytes() for p in sorted((CORPUS / "public" / "logs").glob("*.log")))
    tile = tile if tile.endswith(b"\n") else tile + b"\n"
    with open(path, "wb") as f:
        written = 0
        while written < size:
            f.write(tile)
            written += len(tile)
    return written


def vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def seconds_between(history: list[dict], start: str, end: str) -> float:
    at = {}
    for h in history:
        at.setdefault(h["state"], datetime.fromisoformat(h["at"]))
    ends = [datetime.fromisoformat(h["at"]) for h in history if h["state"] == end]
    return (ends[-1] - at[start]).total_seconds()


def build_kineto_ranks(folder: Path, size: int, ranks: int) -> tuple[list[Path], int]:
    folder.mkdir()
    files = [folder / f"rank{r}.pt.trace.json" for r in range(ranks)]
    return files, sum(build_trace(f, size / ranks / 1024**2, rank=r, world_size=ranks) for r, f in enumerate(files))


def run_case(files: list[Path], workers: int, fanout: bool, part_bytes: int, warmup_bytes: int, tmp: Path) -> Case:
    label = f"{workers} worker{'s' if workers > 1 else ''}" + ("" if fanout else " (single)")
    tmp.mkdir(parents=True)
    env = {"TRACEDOC_FANOUT_BYTES": "1" if fanout else "0", "TRACEDOC_FANOUT_PART_BYTES": str(part_bytes),
           "TRACEDOC_FANOUT_WARMUP_BYTES": str(warmup_bytes), "TRACEDOC_TEAM_MAX_PARSING": "0"}
    with running_stack(tmp, "solo", **env) as stack:
        add_workers(stack, workers - 1)
        started = time.monotonic()
        with ExitStack() as opened:
            parts = [("files", (p.name, opened.enter_context(open(p, "rb")))) for p in files]
            response = requests.post(f"{stack.url}/api/v1/traces/", headers={"Authorization": f"Token {stack.token}"},
                                     files=parts, timeout=3600)
        assert response.status_code in (201, 202), response.text
        trace_id = response.json()["id"]
        while True:
            trace = stack.api("get", f"/api/v1/traces/{trace_id}/").json()
            if trace["state"] in ("done", "failed"):
                break
            time.sleep(POLL_S)
        wall = time.monotonic() - started
        assert trace["state"] == "done", (trace["error"], stack.logs())
        report = stack.api("get", f"/api/v1/traces/{trace_id}/report/").json()
        rss = {log_name: vm_hwm_mib(pid) for log_name, pid in _workers(stack).items()}
        diagnosing = next((n for n in rss if b"Task diagnosis.diagnose_trace[" in (tmp / n).read_bytes()), "worker.log")
        fallbacks = sum((tmp / n).read_bytes().count(b"parsed whole by the merge") for n in rss)
    history = trace["state_history"]
    return Case(label, workers, wall, seconds_between(history, "parsing", "parsed"),
                seconds_between(history, "diagnosing", "done"),
                sum(a["events"] for a in report["trace"]["artifacts"]), len(report["findings"]),
                [round(v) for n, v in rss.items() if n != diagnosing], round(rss[diagnosing]), fallbacks)


def _workers(stack) -> dict[str, int]:
    """Log file name -> pid of each Celery worker process of the stack (solo pool: the
    process that runs the tasks)."""
    pids = [p.pid for p in stack.procs if "worker" in p.args]
    return {("worker.log" if i == 0 else f"worker{i + 1}.log"): pid for i, pid in enumerate(reversed(pids))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=0.05, help="size of the tiled log in GB (default: %(default)s)")
    ap.add_argument("--part-mb", type=float, default=8, help="range size of the fan-out in MB (default: %(default)s)")
    ap.add_argument("--workers", default="1,2,4", help="worker processes per case (default: %(default)s)")
    ap.add_argument("--kineto-ranks", type=int, default=0,
                    help="a multi-rank Kineto trace of this many files instead of one log (default: a log)")
    ap.add_argument("--warmup-kb", type=float, default=None,
                    help="warm-up before each range in KB (default: 1/16 of a range, the ratio of the defaults)")
    args = ap.parse_args(argv)
    if not (reachable(5432) and reachable(6379)):
        print("PostgreSQL (5432) and Redis (6379) are not running: scripts/ensure-services.sh starts them")
        return 1
    counts = [int(n) for n in args.workers.split(",")]
    part_bytes = int(args.part_mb * 1e6)
    warmup_bytes = int(args.warmup_kb * 1e3) if args.warmup_kb is not None else part_bytes // 16
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp_name:
        tmp = Path(tmp_name)
        if args.kineto_ranks:
            files, size = build_kineto_ranks(tmp / "trace", int(args.gb * 1e9), args.kineto_ranks)
            what = (f"{len(files)} Kineto files (ranks), {size / 1e6:,.1f} MB tiled from the corpus's "
                    "healthy decode; one part per file unless TRACEDOC_FANOUT_KINETO_PART_BYTES is set")
        else:
            files = [tmp / "train.log"]
            size = build_log(files[0], int(args.gb * 1e9))
            what = (f"{files[0].name}, {size / 1e6:,.1f} MB tiled from the corpus's public logs; "
                    f"ranges of {args.part_mb:g} MB, warm-up {warmup_bytes / 1e3:,.0f} KB")
        print(f"trace: {what}", flush=True)
        cases = [run_case(files, 1, False, part_bytes, warmup_bytes, tmp / "single")]
        print(_row(cases[0], cases[0]), flush=True)
        for n in counts:
            cases.append(run_case(files, n, True, part_bytes, warmup_bytes, tmp / f"fanout-{n}"))
            print(_row(cases[-1], cases[0]), flush=True)
    base = cases[0]
    same = all((c.events, c.findings) == (base.events, base.findings) for c in cases)
    print(f"same events and findings in every case: {same}")
    print("SUMMARY: " + f"{size / 1e6:,.0f} MB {'Kineto' if args.kineto_ranks else 'log'}; " + "; ".join(
        f"{c.label}: parse {c.parse_s:.0f} s ({base.parse_s / c.parse_s:.2f}x), whole {c.wall_s:.0f} s "
        f"({base.wall_s / c.wall_s:.2f}x), parse RSS {max(c.parse_rss_mib, default=0)} MiB, "
        f"diagnose RSS {c.diagnose_rss_mib} MiB" for c in cases))
    return 0 if same else 1


def _row(c: Case, base: Case) -> str:
    return (f"{c.label:>20}: wall {c.wall_s:7.1f} s ({base.wall_s / c.wall_s:4.2f}x)  parse {c.parse_s:7.1f} s "
            f"({base.parse_s / c.parse_s:4.2f}x)  diagnose {c.diagnose_s:6.1f} s  events {c.events:,}  "
            f"findings {c.findings}  peak RSS: parse-only workers {c.parse_rss_mib} MiB, "
            f"diagnosing worker {c.diagnose_rss_mib} MiB  whole-file fallbacks {c.fallbacks}")


if __name__ == "__main__":
    sys.exit(main())
