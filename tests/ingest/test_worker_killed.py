"""No trace is ever stuck: a real prefork worker on PostgreSQL + Redis, SIGKILLed mid-parse.

Killing the pool child puts the message back in the queue (acks late + reject on worker
lost); killing the whole worker leaves the trace to the beat job `reconcile_traces`. Either
way the trace ends `done` exactly once, with one report and one set of findings."""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.stack import (ROOT, SLOW_LOG_LINES, Stack, pool_children, running_stack, slow_log, start_worker,
                                 wait_for, wait_until_ready)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]



@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("killed"), pool="prefork") as s:
        yield s


def upload_and_wait_mid_parse(stack: Stack) -> int:
    trace_id = stack.upload([("serving.log", slow_log())], wait=0)["id"]
    # mid-parse: the parser has reported bytes read, and has not finished
    wait_for(stack, trace_id, lambda t: t["state"] == "parsing" and 0 < t["progress"]["bytes_done"] < t["progress"]["bytes_total"], timeout=120)
    return trace_id


def assert_done_once(stack: Stack, trace_id: int, history: list[str]) -> None:
    trace = wait_for(stack, trace_id, lambda t: t["state"] in ("done", "failed"), timeout=480)
    assert trace["state"] == "done", (trace["error"], stack.logs())
    assert [h["state"] for h in trace["state_history"]] == history
    report = stack.api("get", f"/api/v1/traces/{trace_id}/report/").json()
    assert report["trace"]["artifacts"][0]["events"] == SLOW_LOG_LINES
    findings = stack.api("get", f"/api/v1/traces/{trace_id}/findings/").json()
    listed = findings["results"] if isinstance(findings, dict) else findings
    assert len(listed) == len(report["findings"])  # recorded once, not once per attempt


def test_a_pool_child_killed_mid_parse_gives_its_trace_back(stack):
    worker = stack.procs[0]
    trace_id = upload_and_wait_mid_parse(stack)
    [child] = pool_children(worker.pid)
    os.kill(child, signal.SIGKILL)
    assert_done_once(stack, trace_id, ["received", "parsing", "parsing", "parsed", "diagnosing", "done"])
    assert b"WorkerLostError" in (stack.tmp / "worker.log").read_bytes()
    assert worker.poll() is None  # the worker itself lived on, with a new pool child


def test_a_worker_killed_as_a_whole_leaves_its_trace_to_the_beat_job(stack):
    trace_id = upload_and_wait_mid_parse(stack)
    os.killpg(stack.procs[0].pid, signal.SIGKILL)
    stack.procs[0].wait()
    stack.procs[0] = start_worker(stack.env, stack.tmp / "worker.log", stack.pool)
    wait_until_ready(stack.procs[0], stack.tmp / "worker.log")
    # Redis would redeliver the message after its visibility timeout (the task time limit +
    # 10 minutes); the beat job is quicker. Here it counts any heartbeat older than 1 s as lost.
    time.sleep(1.5)
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "from tracedoc.workflow import reconcile_traces; print(reconcile_traces(stale_s=1).requeued)"],
        cwd=ROOT, env=stack.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert str(trace_id) in done.stdout.strip().splitlines()[-1].strip("[]").split(", ")
    assert_done_once(stack, trace_id, ["received", "parsing", "parsing", "parsed", "diagnosing", "done"])
