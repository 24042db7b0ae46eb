"""A real tracedoc for integration tests: gunicorn and a Celery worker as subprocesses,
on PostgreSQL + Redis or on the embedded default (SQLite + SQLite broker), each run with
its own database, broker queue and artifact store."""
from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"

# A serving log that takes the log parser several seconds even on a quiet machine (the line
# prefilter parses ~20k lines a second there): time to kill a worker or drop its database
# connections mid-parse.
SLOW_LOG_LINES = 200_000
_LINE = "2024-11-29 08:19:30,038 INFO worker.py:120 request {i} finished in 35.2 ms tokens=128\n"


@functools.cache
def slow_log() -> bytes:
    return "".join(_LINE.format(i=i) for i in range(SLOW_LOG_LINES)).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reachable(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def postgres_database():
    import psycopg
    name = f"tracedoc_it_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgres://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stack_env(tmp: Path, database_url: str, broker_url: str) -> dict:
    env = dict(os.environ)
    env.update({
        "DJANGO_SETTINGS_MODULE": "tracedoc.settings", "DEBUG": "1", "PYTHONPATH": str(ROOT),
        "TRACEDOC_VAR": str(tmp / "var"), "TRACEDOC_STORAGE": str(tmp / "storage"),
        "DATABASE_URL": database_url, "CELERY_BROKER_URL": broker_url,
        "TRACEDOC_QUEUE": f"tracedoc-test-{uuid.uuid4().hex[:8]}",
    })
    return env


def start_worker(env: dict, log: Path, pool: str = "solo", queues: str = "") -> subprocess.Popen:
    """`pool`: solo (one process), or prefork as deployed (a main process and a pool child);
    `queues`: the only queues it reads (comma-separated), else every queue of its settings."""
    return subprocess.Popen([str(BIN / "celery"), "-A", "tracedoc", "worker", f"--pool={pool}", "-c", "1",
                             "--loglevel=INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                             *(["-Q", queues] if queues else [])],
                            cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def wait_until_ready(worker: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    """The worker has declared its queue (so the web process never races it to create the
    SQLite broker's tables) once it logs `ready.`"""
    deadline = time.monotonic() + timeout
    while b" ready." not in log.read_bytes():
        assert worker.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
        time.sleep(0.2)


def stop(proc: subprocess.Popen, grace_s: float = 20) -> None:
    """Stop one process we started (its own session: the worker's children go too)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Stack:
    def __init__(self, tmp: Path, env: dict, pool: str = "solo"):
        self.tmp, self.env, self.pool = tmp, env, pool
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.token = ""

    @property
    def database(self) -> str:
        """The name of the stack's own database (its DATABASE_URL's last part)."""
        return self.env["DATABASE_URL"].rsplit("/", 1)[1]

    def manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def start(self) -> "Stack":
        self.manage("migrate", "--noinput")
        self.token = self.manage("createtoken", "ci", "--team", "infra").splitlines()[-1]
        self.procs.append(start_worker(self.env, self.tmp / "worker.log", self.pool))
        wait_until_ready(self.procs[0], self.tmp / "worker.log")
        self.procs.append(subprocess.Popen(
            [str(BIN / "gunicorn"), "tracedoc.wsgi", "-b", f"127.0.0.1:{self.port}", "-w", "2",
             "--timeout", "300"], cwd=ROOT, env=self.env, stdout=(self.tmp / "web.log").open("wb"),
            stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + 60
        while not reachable(self.port):
            assert time.monotonic() < deadline, self.logs()
            assert all(p.poll() is None for p in self.procs), self.logs()
            time.sleep(0.3)
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            stop(proc)

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n" + (self.tmp / name).read_text(errors="replace")[-4000:]
                         for name in ("worker.log", "web.log") if (self.tmp / name).exists())

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"Token {self.token}"}
        return requests.request(method, self.url + path, headers=headers, timeout=330, **kwargs)

    def upload(self, files: list[tuple[str, bytes]], wait: int = 120, **fields) -> dict:
        response = self.api("post", f"/api/v1/traces/?wait={wait}", data=fields,
                            files=[("files", (name, data)) for name, data in files])
        # 201 done (or no wait asked), 202 still running, 422 a problem document: the diagnosis failed
        assert response.status_code in (201, 202, 422), response.text + self.logs()
        if response.status_code == 422:  # the trace as the other answers give it
            return self.api("get", f"/api/v1/traces/{response.json()['trace']}/").json()
        if response.status_code == 202:  # the server waits at most TRACEDOC_MAX_WAIT_SECONDS: poll, as a client does
            return self._poll(response.json()["id"], time.monotonic() + wait,
                              float(response.headers.get("Retry-After", 1)))
        return response.json()

    def _poll(self, trace_id: int, deadline: float, every: float) -> dict:
        trace = self.api("get", f"/api/v1/traces/{trace_id}/").json()
        while trace["state"] not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(min(every, 1.0))
            trace = self.api("get", f"/api/v1/traces/{trace_id}/").json()
        report = self.api("get", f"/api/v1/traces/{trace_id}/report/")
        return {**trace, "report": report.json() if report.status_code == 200 else None}


@contextmanager
def running_stack(tmp: Path, pool: str = "solo", **env: str):
    """A started Stack on a fresh PostgreSQL database and the local Redis, stopped afterwards;
    `env` adds environment variables (TRACEDOC_...) to its processes. Skips the test when
    PostgreSQL or Redis is not running."""
    import pytest
    if not (reachable(5432) and reachable(6379)):
        pytest.skip("PostgreSQL (5432) and Redis (6379) are not running: scripts/ensure-services.sh starts them")
    with postgres_database() as database_url:
        s = Stack(tmp, {**stack_env(tmp, database_url, "redis://127.0.0.1:6379/0"), **env}, pool=pool).start()
        try:
            yield s
        finally:
            s.stop()


def add_workers(stack: Stack, count: int) -> list[subprocess.Popen]:
    """`count` more Celery workers for `stack`, as on other hosts (logs worker2.log, ...);
    stopped with the stack."""
    added = []
    for _ in range(count):
        n = 1 + sum(1 for p in stack.procs if p.args[:2] == [str(BIN / "celery"), "-A"])
        log = stack.tmp / f"worker{n}.log"
        proc = start_worker(stack.env, log, stack.pool)
        stack.procs.insert(0, proc)  # stopped after the web server, as the first worker is
        wait_until_ready(proc, log)
        added.append(proc)
    return added


def pool_children(pid: int) -> list[int]:
    """A prefork worker's pool processes (Linux: the kernel's list of a process's children)."""
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def wait_for(stack: Stack, trace_id: int, ready, timeout: float = 300) -> dict:
    """The trace as the API shows it once `ready(trace)`; fails with the stack's logs after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        trace = stack.api("get", f"/api/v1/traces/{trace_id}/").json()
        if ready(trace):
            return trace
        assert time.monotonic() < deadline, (trace["state"], trace["error"], stack.logs())
        time.sleep(0.2)


def part_counts(stack: Stack, trace_id: int, field: str = "kind") -> dict:
    """The trace's part rows counted by `field` (kind; attempts of its ranges)."""
    rows = f"ParsePart.objects.filter(trace_id={trace_id})" + (".exclude(kind='merge')" if field != "kind" else "")
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "import json; from collections import Counter; from ingest.parts import ParsePart; "
         f"print(json.dumps(Counter(str(v) for v in {rows}.values_list('{field}', flat=True))))"],
        cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
