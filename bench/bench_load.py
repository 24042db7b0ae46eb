"""Load benchmark: p50/p99 of the trace list and of a report under 50 and 100 concurrent clients,
against the production server setup (gunicorn gthread, DEBUG off, PostgreSQL with the
connection pool, Redis, one Celery worker), on loopback only.

    python -m bench.bench_load [--traces 24] [--requests 10] [--clients 50 100]
                               [--workers 3] [--threads 4] [--worker-class gthread|sync]

The stack is bench.bench_service's (a throwaway PostgreSQL database and Redis db, its own
queue and storage, all removed afterwards), with gunicorn run as docs/deployment.md
recommends. It uploads --traces small traces (the corpus' healthy decode: OTLP spans and
token latencies) and waits until they are diagnosed. Then, for each client count, that many
threads (one keep-alive HTTP session each) start together and each sends --requests
requests, alternating `GET /api/v1/traces/` and `GET /api/v1/traces/{id}/report/` (ids taken
in turn). Every answer must be 200: any other status or a connection error is an error, and
the exit status is 1 when there is one. While the clients run, PostgreSQL's connections to
the bench database are sampled; their peak shows that the pools bound them (at most
workers x pool size for the web, plus the worker's). The last line (`SUMMARY: ...`) is the
one-line result to paste.
"""
from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import requests

from bench.bench_service import PG_ADMIN, ROOT, Stack, postgres_database, reachable, redis_database
from tests.corpus import corpus

SEED_FILES = (("h200", "healthy_decode", "otlp_traces.json"), ("h200", "healthy_decode", "token_latency.jsonl"))
SEED_TIMEOUT_S = 600
REQUEST_TIMEOUT_S = 60
PG_SAMPLE_S = 0.1


@dataclass
class LoadStack(Stack):
    """bench_service's stack, served by gunicorn's threaded workers."""
    workers: int = 3
    threads: int = 4
    worker_class: str = "gthread"
    database: str = ""

    def start(self, exits: ExitStack) -> None:
        self.manage("migrate", "--noinput")
        self.token = self.manage("createtoken", "bench", "--team", "bench").splitlines()[-1]
        self.worker = self.spawn(exits, "worker.log", str(Path(sys.executable).parent / "celery"), "-A",
                                 "tracedoc", "worker", "--pool=prefork", "--concurrency=1", "--loglevel=INFO",
                                 "--without-gossip", "--without-mingle", "--without-heartbeat")
        self.web = self.spawn(exits, "web.log", str(Path(sys.executable).parent / "gunicorn"), "tracedoc.wsgi",
                              "-b", f"127.0.0.1:{self.port}", "-k", self.worker_class, "-w", str(self.workers),
                              "--threads", str(self.threads), "--timeout", "60", "--keep-alive", "5")
        deadline = time.monotonic() + 120
        while b" ready." not in (self.tmp / "worker.log").read_bytes() or not reachable(self.port):
            if self.worker.poll() is not None or self.web.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the stack did not start:\n{self.logs()}")
            time.sleep(0.2)


@contextmanager
def load_stack(tmp: Path, workers: int, threads: int, worker_class: str) -> Iterator[LoadStack]:
    token = secrets.token_hex(5)
    queue = f"tracedoc-bench-{token}"
    with ExitStack() as exits:
        database_url = exits.enter_context(postgres_database(token))
        broker_url = exits.enter_context(redis_database(token, queue))
        env = dict(os.environ)
        env.update({  # as bench_service's stack: production settings on plain HTTP, no upload throttle
            "DJANGO_SETTINGS_MODULE": "tracedoc.settings", "PYTHONPATH": str(ROOT),
            "DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(40), "ALLOWED_HOSTS": "127.0.0.1",
            "TRACEDOC_INSECURE_HTTP": "1", "TRACEDOC_VAR": str(tmp / "var"),
            "TRACEDOC_STORAGE": str(tmp / "storage"), "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": broker_url, "TRACEDOC_QUEUE": queue,
            "TRACEDOC_UPLOAD_THROTTLE_RATE": "", "LOG_LEVEL": "WARNING",
        })
        stack = LoadStack(tmp, env, workers=workers, threads=threads, worker_class=worker_class, database=database_url.rsplit("/", 1)[1])
        stack.start(exits)  # processes are stopped before the database and Redis go (LIFO)
        yield stack


def seed(stack: LoadStack, count: int) -> list[int]:
    """Upload `count` traces and wait until every one is diagnosed; their ids."""
    ids = []
    for k in range(count):
        files = [("files", (parts[-1], corpus(*parts).read_bytes())) for parts in SEED_FILES]
        answer = stack.api("post", "/api/v1/traces/", files=files, data={"name": f"load-{k}"})
        if answer.status_code != 201:
            raise RuntimeError(f"upload answered {answer.status_code}: {answer.text[:500]}\n{stack.logs()}")
        ids.append(answer.json()["id"])
    deadline = time.monotonic() + SEED_TIMEOUT_S
    for trace_id in ids:
        while (state := stack.api("get", f"/api/v1/traces/{trace_id}/").json()["state"]) != "done":
            if state == "failed" or time.monotonic() > deadline:
                raise RuntimeError(f"trace {trace_id} is {state}\n{stack.logs()}")
            time.sleep(0.5)
    return ids


@dataclass
class Round:
    clients: int
    seconds: float = 0.0
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"list": [], "report": []})
    errors: list[str] = field(default_factory=list)
    peak_connections: int = 0


def pg_connections(database: str, stop: threading.Event, result: Round) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        while not stop.is_set():
            (count,) = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                                    (database,)).fetchone()
            result.peak_connections = max(result.peak_connections, count)
            stop.wait(PG_SAMPLE_S)


def run_round(stack: LoadStack, ids: list[int], clients: int, per_client: int) -> Round:
    result = Round(clients)
    start = threading.Barrier(clients + 1)
    lock = threading.Lock()

    def client(k: int) -> None:
        with requests.Session() as session:
            session.headers["Authorization"] = f"Token {stack.token}"
            start.wait()
            for n in range(per_client):
                kind = "list" if (k + n) % 2 == 0 else "report"
                path = "/api/v1/traces/" if kind == "list" else f"/api/v1/traces/{ids[(k + n) % len(ids)]}/report/"
                began = time.perf_counter()
                try:
                    status = session.get(stack.url + path, timeout=REQUEST_TIMEOUT_S).status_code
                except requests.RequestException as e:
                    status, error = None, f"{path}: {type(e).__name__}"
                took = time.perf_counter() - began
                with lock:
                    if status == 200:
                        result.latencies[kind].append(took)
                    else:
                        result.errors.append(error if status is None else f"{path}: {status}")

    stop = threading.Event()
    sampler = threading.Thread(target=pg_connections, args=(stack.database, stop, result), daemon=True)
    sampler.start()
    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client, k) for k in range(clients)]
        start.wait()
        began = time.perf_counter()
        for f in futures:
            f.result()
        result.seconds = time.perf_counter() - began
    stop.set()
    sampler.join()
    return result


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if len(values) > 1 else values[0]


def describe(r: Round) -> str:
    parts = []
    for kind, values in r.latencies.items():
        if values:
            parts.append(f"{kind} p50/p99 {quantile(values, 0.5) * 1000:,.0f}/{quantile(values, 0.99) * 1000:,.0f} ms "
                         f"({len(values)})")
    done = sum(len(v) for v in r.latencies.values())
    return (f"{r.clients} clients: {', '.join(parts)}; {done / r.seconds:,.0f} req/s; {len(r.errors)} errors; "
            f"PostgreSQL connections peak {r.peak_connections}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=24)
    ap.add_argument("--requests", type=int, default=10, help="requests per client per round")
    ap.add_argument("--clients", type=int, nargs="+", default=[50, 100])
    ap.add_argument("--workers", type=int, default=3, help="gunicorn worker processes")
    ap.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    ap.add_argument("--worker-class", default="gthread", choices=["gthread", "sync"])
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tracedoc-load-") as tmp, \
            load_stack(Path(tmp), args.workers, args.threads, args.worker_class) as stack:
        ids = seed(stack, args.traces)
        list_bytes = len(stack.api("get", "/api/v1/traces/").content)
        threads = f" x {args.threads} threads" if args.worker_class == "gthread" else ""
        print(f"stack: gunicorn {args.worker_class} {args.workers} workers{threads}, DB pool "
              f"{stack.env.get('TRACEDOC_DB_POOL_SIZE', '4')} per process; {len(ids)} traces, list answer "
              f"{list_bytes / 1024:,.1f} KiB; {args.requests} requests per client")
        rounds = []
        for clients in args.clients:
            r = run_round(stack, ids, clients, args.requests)
            rounds.append(r)
            print(describe(r))
            for error in sorted(set(r.errors))[:10]:
                print(f"  error: {error}")
    print("SUMMARY: " + " | ".join(describe(r) for r in rounds))
    return 1 if any(r.errors for r in rounds) else 0


if __name__ == "__main__":
    sys.exit(main())
