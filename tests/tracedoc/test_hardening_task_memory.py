"""A trace whose diagnosis needs more memory than a task may have (TRACEDOC_TASK_MEMORY_LIMIT_MB,
RLIMIT_DATA in the prefork pool child) fails with an "out of memory" reason, and the same
worker goes on to diagnose the next trace: one trace fails, not the machine."""
from __future__ import annotations

import gzip
import io
import time
from pathlib import Path

import pytest

from tests.support.stack import Stack, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

LIMIT_MB = 450  # a pool child holds ~250 MB of code and libraries; the big trace peaks at ~550 MB
BIG_EVENTS = 1_000_000
SMALL_LOG = b"2024-11-29 08:19:30,038 INFO worker.py:120 request 1 finished in 35.2 ms tokens=128\n" * 100


def big_kineto() -> bytes:
    """A Kineto trace of 1 M kernel events: 8.6 MB gzipped, ~550 MB peak to diagnose."""
    out = io.BytesIO()
    event = '{"ph":"X","cat":"kernel","name":"gemm_%d","pid":0,"tid":7,"ts":%d,"dur":5,"args":{"correlation":%d}}'
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=1) as f:
        f.write(b'{"schemaVersion":1,"traceEvents":[')
        f.write(",".join(event % (i % 500, i * 10, i) for i in range(BIG_EVENTS)).encode())
        f.write(b"]}")
    return out.getvalue()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("task-memory"), pool="prefork",
                       TRACEDOC_TASK_MEMORY_LIMIT_MB=str(LIMIT_MB)) as s:
        yield s


def pool_child_limit(pid: int) -> int:
    [child] = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    line = next(x for x in Path(f"/proc/{child}/limits").read_text().splitlines() if x.startswith("Max data size"))
    return int(line.split()[3])


def finished(stack: Stack, trace_id: int, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while (trace := stack.api("get", f"/api/v1/traces/{trace_id}/").json())["state"] not in ("done", "failed"):
        assert time.monotonic() < deadline, (trace, stack.logs())
        time.sleep(0.5)
    return trace


def test_a_trace_past_the_task_memory_limit_fails_alone_and_the_worker_serves_on(stack):
    worker = stack.procs[0]
    assert pool_child_limit(worker.pid) == LIMIT_MB * 2**20  # the cap is on the pool child
    big = stack.upload([("big_kineto.json.gz", big_kineto())], wait=0)["id"]
    trace = finished(stack, big)
    assert trace["state"] == "failed", stack.logs()
    reasons = trace["error"] + " ".join(a["error"] for a in stack.api("get", f"/api/v1/traces/{big}/").json()["artifacts"])
    assert "out of memory" in reasons and "TRACEDOC_TASK_MEMORY_LIMIT_MB" in reasons, reasons

    small = stack.upload([("serving.log", SMALL_LOG)], wait=0)["id"]
    assert finished(stack, small)["state"] == "done", stack.logs()
    assert worker.poll() is None  # the same worker, still serving
