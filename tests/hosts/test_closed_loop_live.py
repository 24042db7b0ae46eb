"""The closed loop on the real stack (gunicorn, a Celery worker, PostgreSQL, Redis) with the
agent's `wrap` around a small CPU loop (tools/closed_loop/spiky_loop.py):

1. a first run ships only per-step latency records: the report says latency.jitter and what
   would decide it (a profiler window around the next slow step); the team's policy has the
   rule opted in, so the finding orders that capture from the host's agent;
2. a second run of the job: its agent receives the order in a heartbeat, the hook waits for a
   slow step and keeps a profiler window that holds one, the capture ships as a trace that is
   diagnosed with the first run's files, and the order records before -> after;
3. the policy's limits: one outstanding order per cluster and host, and the host rate limit."""
from __future__ import annotations

import sys
import uuid

import pytest

from tests.hosts.test_agent_live import agent, traces_labelled, wait_for
from tests.support.stack import ROOT, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
LOOP = ROOT / "tools" / "closed_loop" / "spiky_loop.py"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("closed-loop")) as s:
        yield s


def run_job(stack, tmp_path, host: str, name: str, steps: int, sleep_ms: float = 0) -> None:
    out = tmp_path / f"{name}.jsonl"
    proc = agent(stack, stack.url, tmp_path / f"spool-{name}", "wrap", "--heartbeat", "1s",
                 "--logs", str(out), "--from-start", "--labels", f"host={host}", f"run={name}",
                 "--", sys.executable, str(LOOP), "--steps", str(steps), "--period", "6", "--spike-ms", "60",
                 "--out", str(out), "--step-sleep-ms", str(sleep_ms), stdout=(tmp_path / f"{name}.out").open("wb"),
                 stderr=(tmp_path / f"{name}.err").open("wb"))
    assert proc.wait(timeout=300) == 0, (tmp_path / f"{name}.err").read_text()


def finished(stack, trace_id: int):
    body = stack.api("get", f"/api/v1/traces/{trace_id}/").json()
    return body if body["state"] in ("done", "failed") else None


def test_an_undetermined_jitter_orders_a_profiler_window_and_the_capture_decides_it(stack, tmp_path):
    pytest.importorskip("torch")
    host = f"loop-{uuid.uuid4().hex[:8]}"
    policy = stack.api("put", "/api/v1/capture-policy/", json={"enabled": True, "rules": ["latency.jitter"],
                                                                "max_per_host_per_hour": 1})
    assert policy.status_code == 200, policy.text

    run_job(stack, tmp_path, host, "first", steps=90)
    [first] = [t for t in traces_labelled(stack, "run=first") if t["labels"].get("host") == host]
    first = wait_for("the first run's diagnosis", lambda: finished(stack, first["id"]), timeout=240, every=1)
    assert first["state"] == "done", first["error"]
    report = stack.api("get", f"/api/v1/traces/{first['id']}/report/").json()
    [jitter] = [f for f in report["findings"] if f["rule_id"] == "latency.jitter"]
    assert jitter["capture"]["kind"] == "profiler" and jitter["capture"]["trigger"] == "slow_step"
    orders = wait_for("the order", lambda: stack.api("get", f"/api/v1/captures/?host={host}").json()["results"])
    [order] = orders
    assert order["origin"] == "auto" and order["rule_id"] == "latency.jitter" and order["state"] == "pending"
    assert order["source_trace"] == first["id"] and order["before"]["rule_id"] == "latency.jitter"

    # the job runs again: its agent receives the order in a heartbeat, the loop's hook takes a
    # profiler window at the next slow step. Its own report shows the jitter again, while the order
    # is outstanding or just done: no second order (the host's hourly limit of 1 refuses one too)
    run_job(stack, tmp_path, host, "again", steps=400, sleep_ms=20)
    capture = wait_for("the capture", lambda: (b := stack.api("get", f"/api/v1/captures/{order['id']}/").json())
                       ["state"] in ("done", "failed", "expired") and b, timeout=120, every=0.5)
    assert capture["state"] == "done", (capture, (tmp_path / "again.err").read_text()[-3000:])
    [again] = [t for t in traces_labelled(stack, "run=again") if t["labels"].get("capture") == "wrap"]
    wait_for("the repeat's diagnosis", lambda: finished(stack, again["id"]), timeout=240, every=1)
    assert len(stack.api("get", f"/api/v1/captures/?host={host}").json()["results"]) == 1
    trace = wait_for("the capture's diagnosis", lambda: finished(stack, capture["trace"]), timeout=240, every=1)
    assert trace["state"] == "done", trace["error"]
    assert "kineto" in {a["format"] for a in trace["artifacts"]}
    after = wait_for("the outcome", lambda: stack.api("get", f"/api/v1/captures/{order['id']}/").json()["after"])
    assert after["trace"] == trace["id"]
    report = stack.api("get", f"/api/v1/traces/{trace['id']}/report/").json()
    names = {a["path"] for a in report["trace"]["artifacts"]}
    assert any(n.startswith("before/") for n in names)  # diagnosed with the first run's files
    rules = {f["rule_id"] for f in report["findings"]}
    assert "latency.spike-host-work" in rules, report["findings"]
    assert after["decided"] and "latency.spike-host-work" in {f["rule_id"] for f in after["findings"]}
