"""Service benchmark: upload -> report through the real web app, Celery, Redis and PostgreSQL,
against `tracedoc diagnose` on the same file.

    python -m bench.bench_service [--mb 150] [--file F] [--rounds 2]

Starts a throwaway stack of its own: a PostgreSQL database it creates (and drops), a Redis
database number nobody uses (claimed with a marker key, emptied afterwards), its own Celery
queue name, storage in a temp dir, `manage.py migrate` and `createtoken`, gunicorn (2 sync
workers, DEBUG off, warmed up by a few API requests as a running service is) and one Celery
worker (prefork, concurrency 1, as deployed; its first task imports what it needs). The
trace is `bench.bench_kineto_parse.build_trace` (the corpus Kineto trace tiled to --mb MB),
gzipped, built in a subprocess so that this process stays small; or --file. On that file:

* CLI: `tracedoc diagnose -q --format json FILE` in a fresh subprocess: wall clock (interpreter
  start and imports included), CPU time and peak RSS (`wait4`'s ru_maxrss; this process is
  smaller than the CLI's peak, so the exec does not carry ours over).
* Service: `POST /api/v1/traces/` (token auth), then `GET /api/v1/traces/{id}/` every
  POLL_S until done, then `GET .../report/`: wall clock from the start of the upload to the
  report in hand. Each poll's state, stage and progress are kept: the bench checks that the
  progress percent never goes back and ends at 100, and prints whether the parse moves it
  (bytes read) and which stage names the API reported. The server's own state history gives
  the time in each state (queue, parse, hand-off, diagnosis). Peak RSS of the worker is the
  VmHWM of its pool child (the process that ran both tasks), read before the stack stops.

The CLI and the service run --rounds times each, alternated (the same file uploaded again is
parsed again; the worker is warm after its first trace, as a running service is). Ratio: the
best service wall clock over the best CLI wall clock (target <= 1.5x): on a shared machine
one run of either can take twice as long as the next; CPU time is printed too. The two
reports must agree (event count and findings), or the service did not do the same work; the
progress must never go back and end at 100. Exit status 1 when the target is missed,
a check fails or the stack fails. Everything started is stopped, and the database, Redis
keys and temp files removed, on failure and on SIGTERM/Ctrl-C too. The last line
(`SUMMARY: ...`) is the one-line result to paste.
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil
import psycopg
import redis
import requests

from bench.bench_kineto_parse import build_trace
from tests.support.stack import free_port, postgres_database, reachable, stop  # the test stacks' helpers

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
TARGET_RATIO = 1.5
POLL_S = 0.2
WEB_WORKERS = 2  # gunicorn sync workers: one takes the upload, the other answers the polls
SERVICE_TIMEOUT_S = 900
MIB = 1024**2
TASK_DONE = re.compile(r"Task (?P<name>[\w.]+)\[[^\]]+\] succeeded in (?P<seconds>[\d.]+)s")
# kombu's bookkeeping keys in a Redis db a worker used, besides the ones named after the queue
KOMBU_SHARED_KEYS = ("unacked", "unacked_index", "unacked_mutex")


# --- the trace -----------------------------------------------------------------------------

def build_gzipped_trace(out: Path, min_mb: int) -> int:
    """Runs in a subprocess (`--build`): the tiled Kineto JSON, gzipped into `out` (the JSON
    removed); returns the JSON's size."""
    plain = out.with_suffix("")  # rank0.pt.trace.json
    size = build_trace(plain, min_mb)
    with plain.open("rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 8 * MIB)
    plain.unlink()
    return size


def prepare_trace(tmp: Path, min_mb: int) -> tuple[Path, int]:
    out = tmp / "rank0.pt.trace.json.gz"
    proc = subprocess.run([sys.executable, "-m", "bench.bench_service", "--build", str(out), str(min_mb)],
                          check=False, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"building the trace failed: {proc.stderr.strip()[-2000:]}")
    return out, int(proc.stdout.strip().splitlines()[-1])


# --- the stack -----------------------------------------------------------------------------

@contextmanager
def redis_database(token: str, queue: str) -> Iterator[str]:
    """An empty Redis db number (the tests use 0), claimed with a marker key so that another
    bench does not take it too. Afterwards the keys of our queue, the marker, and kombu's
    shared bookkeeping keys when nothing else is left are deleted."""
    marker = f"tracedoc-bench:{token}"
    for number in range(15, 0, -1):
        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=number)
        if client.dbsize() == 0 and client.set(marker, "1", nx=True):
            if client.dbsize() == 1:
                break
            client.delete(marker)  # someone else wrote there at the same moment
        client.close()
    else:
        raise RuntimeError("no empty Redis database among 1..15")
    try:
        yield f"redis://{REDIS_HOST}:{REDIS_PORT}/{number}"
    finally:
        ours = [k for k in client.scan_iter() if queue.encode() in k]
        client.delete(marker, *ours)
        if set(client.scan_iter()) <= {k.encode() for k in KOMBU_SHARED_KEYS}:
            client.delete(*KOMBU_SHARED_KEYS)
        left = client.dbsize()
        if left:
            print(f"note: Redis db {number} still holds {left} keys that are not this bench's")
        client.close()


@dataclass
class Stack:
    tmp: Path
    env: dict
    port: int = field(default_factory=free_port)
    token: str = ""
    worker: subprocess.Popen | None = None
    web: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], check=False, cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=300)
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)}: {done.stderr.strip()[-2000:]}")
        return done.stdout.strip()

    def spawn(self, exits: ExitStack, log: str, *argv: str) -> subprocess.Popen:
        proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=(self.tmp / log).open("wb"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        exits.callback(stop, proc, 30)
        return proc

    def start(self, exits: ExitStack) -> None:
        self.manage("migrate", "--noinput")
        self.token = self.manage("createtoken", "bench", "--team", "bench").splitlines()[-1]
        self.worker = self.spawn(exits, "worker.log", str(BIN / "celery"), "-A", "tracedoc", "worker",
                                 "--pool=prefork", "--concurrency=1", "--loglevel=INFO",
                                 "--without-gossip", "--without-mingle", "--without-heartbeat")
        self.web = web = self.spawn(exits, "web.log", str(BIN / "gunicorn"), "tracedoc.wsgi", "-b",
                         f"127.0.0.1:{self.port}", "-w", str(WEB_WORKERS), "--timeout", "300")
        deadline = time.monotonic() + 120
        while b" ready." not in (self.tmp / "worker.log").read_bytes() or not reachable(self.port):
            if self.worker.poll() is not None or web.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the stack did not start:\n{self.logs()}")
            time.sleep(0.2)
        self.warm_up()

    def warm_up(self) -> None:
        """A deployed web app is warm: each gunicorn worker imports the URLconf, DRF and the
        views on its first request (seconds on a busy machine), which would otherwise land
        inside the timed upload and polls. Pairs of concurrent requests reach both workers."""
        with ThreadPoolExecutor(WEB_WORKERS) as pool:
            for _ in range(3):
                answers = list(pool.map(lambda _: self.api("get", "/api/v1/traces/"), range(WEB_WORKERS)))
                if any(a.status_code != 200 for a in answers):
                    raise RuntimeError(f"warm-up answered {[a.status_code for a in answers]}\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n" + (self.tmp / name).read_text(errors="replace")[-3000:]
                         for name in ("worker.log", "web.log") if (self.tmp / name).exists())

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(method, self.url + path, headers={"Authorization": f"Token {self.token}"},
                                timeout=330, **kwargs)

    def task_seconds(self) -> list[str]:
        """Celery's own `Task NAME[id] succeeded in S s` lines: each task's run time in the pool."""
        lines = (self.tmp / "worker.log").read_text(errors="replace").splitlines()
        return [f"{m['name']} {float(m['seconds']):.2f} s" for m in map(TASK_DONE.search, lines) if m]

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) so far of the worker's pool child and the web workers: on
        a shared machine it moves less than the wall clock with what else runs."""
        def cpu(procs) -> float:
            return sum(t.user + t.system for t in (p.cpu_times() for p in procs))
        return {"worker": cpu(psutil.Process(self.worker.pid).children()),
                "web": cpu(psutil.Process(self.web.pid).children())}

    def pool_peaks(self) -> dict[str, int]:
        """VmHWM (bytes) of the worker's main process and of its pool child."""
        main = psutil.Process(self.worker.pid)
        peaks = {"main": _vm_hwm(main.pid)}
        children = main.children()
        if children:
            peaks["pool child"] = max(_vm_hwm(c.pid) for c in children)
        return peaks


def _vm_hwm(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1024


@contextmanager
def service_stack(tmp: Path) -> Iterator[Stack]:
    token = secrets.token_hex(5)
    queue = f"tracedoc-bench-{token}"
    with ExitStack() as exits:
        database_url = exits.enter_context(postgres_database())
        broker_url = exits.enter_context(redis_database(token, queue))
        env = dict(os.environ)
        env.update({
            "DJANGO_SETTINGS_MODULE": "tracedoc.settings", "PYTHONPATH": str(ROOT),
            "DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(40), "ALLOWED_HOSTS": "127.0.0.1",
            "TRACEDOC_INSECURE_HTTP": "1",  # plain HTTP on loopback: no HTTPS redirect
            "TRACEDOC_VAR": str(tmp / "var"), "TRACEDOC_STORAGE": str(tmp / "storage"),
            "DATABASE_URL": database_url, "CELERY_BROKER_URL": broker_url, "TRACEDOC_QUEUE": queue,
            "TRACEDOC_UPLOAD_THROTTLE_RATE": "", "LOG_LEVEL": "WARNING",
        })
        stack = Stack(tmp, env)
        stack.start(exits)  # processes are stopped before the database and Redis go (LIFO)
        yield stack


# --- the measurements ----------------------------------------------------------------------

def time_cli(trace: Path, tmp: Path) -> dict:
    out = tmp / "cli-report.json"
    started = time.perf_counter()
    errors = tmp / "cli-stderr.txt"
    with out.open("wb") as stdout, errors.open("wb") as stderr:
        proc = subprocess.Popen([str(BIN / "tracedoc"), "diagnose", "-q", "--format", "json",
                                 "--fail-on", "critical", str(trace)], cwd=ROOT, stdout=stdout, stderr=stderr)
        try:
            _, status, usage = os.wait4(proc.pid, 0)  # wait4: the child's rusage, Popen's wait has none
        except BaseException:  # SIGTERM or Ctrl-C while it runs: it must not outlive the bench
            proc.kill()
            proc.wait()
            raise
    wall = time.perf_counter() - started
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise RuntimeError(f"tracedoc diagnose exited {code}: {errors.read_text(errors='replace').strip()[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_rss": usage.ru_maxrss * 1024,
            "report": json.loads(out.read_bytes())}


@dataclass
class Poll:
    t: float  # seconds since the upload started
    state: str
    stage: str
    percent: int
    bytes_done: int
    bytes_total: int
    events_done: int


def time_service(stack: Stack, trace: Path) -> dict:
    cpu_before = stack.cpu_seconds()
    started_at, started = time.time(), time.perf_counter()
    with trace.open("rb") as f:
        answer = stack.api("post", "/api/v1/traces/", files=[("files", (trace.name, f))],
                           data={"name": "bench"})
    uploaded = time.perf_counter() - started
    if answer.status_code != 201:
        raise RuntimeError(f"upload answered {answer.status_code}: {answer.text[:500]}\n{stack.logs()}")
    trace_id = answer.json()["id"]
    polls: list[Poll] = []
    while True:
        body = stack.api("get", f"/api/v1/traces/{trace_id}/").json()
        p = body["progress"]
        polls.append(Poll(time.perf_counter() - started, body["state"], p["stage"], p["percent"],
                          p["bytes_done"], p["bytes_total"], p["events_done"]))
        if body["state"] in ("done", "failed"):
            break
        if polls[-1].t > SERVICE_TIMEOUT_S:
            raise RuntimeError(f"trace {trace_id} not done after {SERVICE_TIMEOUT_S} s\n{stack.logs()}")
        time.sleep(POLL_S)
    if body["state"] == "failed":
        raise RuntimeError(f"trace {trace_id} failed: {body['error']}\n{stack.logs()}")
    report = stack.api("get", f"/api/v1/traces/{trace_id}/report/")
    wall = time.perf_counter() - started
    if report.status_code != 200:
        raise RuntimeError(f"report answered {report.status_code}: {report.text[:500]}")
    history = [(entry["state"], datetime.fromisoformat(entry["at"]).timestamp() - started_at)
               for entry in body["state_history"]]
    cpu = {k: v - cpu_before[k] for k, v in stack.cpu_seconds().items()}
    return {"wall": wall, "cpu": cpu, "upload": uploaded, "polls": polls, "history": history,
            "report": report.json()}


# --- the checks and the output -------------------------------------------------------------

def same_work(cli: dict, service: dict) -> tuple[bool, str]:
    def gist(report: dict) -> tuple[int, list[str]]:
        return report["trace"]["events"], sorted(f["rule_id"] for f in report["findings"])
    a, b = gist(cli), gist(service)
    return a == b, f"{a[0]:,} events, {len(a[1])} findings" if a == b else f"CLI {a} vs service {b}"


def progress_checks(polls: list[Poll]) -> dict:
    percents = [p.percent for p in polls]
    parsing = [p for p in polls if p.state == "parsing"]
    stages: list[str] = []
    for p in polls:
        if p.stage and p.stage not in stages:
            stages.append(p.stage)
    # how long the bar stood at its last parse value while the worker was still parsing: a
    # bar that follows the work moves until the parse ends
    top = max((p.percent for p in parsing), default=0)
    first_top = next((p.t for p in parsing if p.percent == top), None)
    return {
        "parse_seconds": (parsing[-1].t - parsing[0].t) if parsing else 0.0,
        "parse_stuck_seconds": (parsing[-1].t - first_top) if first_top is not None else 0.0,
        "monotonic": all(b >= a for a, b in itertools.pairwise(percents)),
        "reaches_100": bool(percents) and percents[-1] == 100,
        "parse_polls": len(parsing),
        "parse_percents": sorted({p.percent for p in parsing}),
        "parse_bytes_moved": len({p.bytes_done for p in parsing}) > 1,
        "stages": stages,
    }


def print_service(service: dict) -> None:
    print(f"  upload request {service['upload']:.2f} s; server state history (s since the upload started):")
    history = service["history"]
    for (state, at), nxt in zip(history, [*history[1:], None]):
        spent = f", {nxt[1] - at:.2f} s in it" if nxt else ""
        print(f"    {at:7.2f}  {state}{spent}")
    print("  polls (s, state, stage, percent, bytes read, events parsed):")
    last = None
    for p in service["polls"]:
        shown = (p.state, p.stage, p.percent, p.bytes_done, p.events_done)
        if shown != last:
            print(f"    {p.t:7.2f}  {p.state:<10} {p.stage or '-':<9} {p.percent:3d}%  "
                  f"{p.bytes_done / MIB:,.1f} of {p.bytes_total / MIB:,.1f} MiB  {p.events_done:>10,}")
        last = shown


def report(size_gz: int, size_json: int | None, rounds: list[tuple[dict, dict]], tasks: list[str],
           peaks: dict[str, int]) -> int:
    print(f"trace: {size_gz / MIB:,.1f} MiB gzipped" + (f" ({size_json / MIB:,.1f} MiB JSON)" if size_json else ""))
    all_met = True
    for k, (cli, service) in enumerate(rounds, 1):
        cpu = service["cpu"]
        print(f"round {k}: CLI {cli['wall']:.2f} s wall, {cli['cpu']:.2f} s CPU, peak RSS "
              f"{cli['peak_rss'] / MIB:,.0f} MiB | service upload -> report {service['wall']:.2f} s wall, CPU "
              f"{cpu['worker']:.2f} s worker pool child + {cpu['web']:.2f} s web workers (PostgreSQL, Redis not "
              f"counted) | {service['wall'] / cli['wall']:.2f}x wall, "
              f"{(cpu['worker'] + cpu['web']) / cli['cpu']:.2f}x CPU")
        if k == 1:  # the worker's first task imports what it needs: the round worth reading in detail
            print_service(service)
        checks = progress_checks(service["polls"])
        same, gist = same_work(cli["report"], service["report"])
        print(f"  progress: monotonic {checks['monotonic']}, ends at 100 {checks['reaches_100']}; while "
              f"parsing ({checks['parse_polls']} polls) percent {checks['parse_percents']}, bytes read move "
              f"{checks['parse_bytes_moved']}, bar at its last parse value for {checks['parse_stuck_seconds']:.1f} "
              f"of {checks['parse_seconds']:.1f} s of parsing; stages: {', '.join(checks['stages'])}; "
              f"same report gist as the CLI: {same} ({gist})")
        all_met &= same and checks["monotonic"] and checks["reaches_100"]
    print(f"tasks in the worker: {'; '.join(tasks) or 'none logged'}")
    print(f"worker peak RSS (VmHWM, all rounds): pool child {peaks.get('pool child', 0) / MIB:,.0f} MiB, "
          f"main process {peaks['main'] / MIB:,.0f} MiB")
    best_cli = min(cli["wall"] for cli, _ in rounds)
    best_service = min(service["wall"] for _, service in rounds)
    ratio = best_service / best_cli
    best_cpu = min(s["cpu"]["worker"] + s["cpu"]["web"] for _, s in rounds) / min(c["cpu"] for c, _ in rounds)
    met = all_met and ratio <= TARGET_RATIO
    checks = progress_checks(rounds[0][1]["polls"])
    print(f"ratio service / CLI, best of {len(rounds)} each: {ratio:.2f}x wall clock (target <= {TARGET_RATIO}x), "
          f"{best_cpu:.2f}x CPU")
    print(f"SUMMARY: service upload -> report {best_service:.2f} s vs CLI {best_cli:.2f} s (best of {len(rounds)}) "
          f"on {size_gz / MIB:,.1f} MiB gz: {ratio:.2f}x (target <= {TARGET_RATIO}x), CPU {best_cpu:.2f}x; worker "
          f"pool child peak {peaks.get('pool child', 0) / MIB:,.0f} MiB, CLI "
          f"{max(c['peak_rss'] for c, _ in rounds) / MIB:,.0f} MiB; progress "
          f"{'monotonic' if all_met else 'NOT monotonic or reports differ'}, parse moves it "
          f"{'yes' if len(checks['parse_percents']) > 1 else 'no'} (then stands for "
          f"{checks['parse_stuck_seconds']:.0f} of {checks['parse_seconds']:.0f} s), stages "
          f"{'/'.join(checks['stages'])}; {'met' if met else 'NOT met'}")
    return 0 if met else 1


def _raise_on_sigterm(signum, frame) -> None:
    raise SystemExit(f"signal {signum}: cleaning up")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=150, help="minimum size of the tiled JSON (MB)")
    ap.add_argument("--file", type=Path, help="a trace file of your own instead of the tiled one")
    ap.add_argument("--rounds", type=int, default=2, help="CLI and service runs, alternated (the ratio "
                    "compares the best of each)")
    ap.add_argument("--build", nargs=2, metavar=("OUT", "MB"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.build:
        print(build_gzipped_trace(Path(args.build[0]), int(args.build[1])))
        return 0
    signal.signal(signal.SIGTERM, _raise_on_sigterm)  # so that the clean-up below runs
    tmp = Path(tempfile.mkdtemp(prefix="tracedoc-bench-service-"))
    try:
        if args.file:
            trace, size_json = args.file.resolve(), None
        else:
            trace, size_json = prepare_trace(tmp, args.mb)
        with service_stack(tmp) as stack:
            # alternated, so that both see the same moods of a shared machine
            rounds = [(time_cli(trace, tmp), time_service(stack, trace)) for _ in range(args.rounds)]
            time.sleep(0.5)  # the pool logs the last task's time just after it has returned
            tasks, peaks = stack.task_seconds(), stack.pool_peaks()
        return report(trace.stat().st_size, size_json, rounds, tasks, peaks)
    except (RuntimeError, OSError, requests.RequestException, psycopg.Error, redis.RedisError,
            psutil.Error, subprocess.SubprocessError, KeyError, ValueError) as e:
        # the stack is down and cleaned by now: say why and fail
        print(f"SUMMARY: service benchmark FAILED: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
