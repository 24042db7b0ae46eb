"""The agent against a real tracedoc (gunicorn, a Celery worker, PostgreSQL, Redis):

- an outage: the server is unreachable while `tracedoc-agent run` spools bundles, then it
  comes back but the answers to the first uploads are lost on the way (the server made the
  trace, the agent saw a failure and sends again): every bundle becomes exactly one trace,
  every logged byte arrives once, and the worker diagnoses them;
- an on-demand capture: asked through the API, picked up by `tracedoc-agent wrap` in its
  heartbeat's answer, run by the wrapped program's hook (a torch.profiler window), shipped as
  a trace the worker parses, and the request shows done with that trace."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from tests.support.flaky_proxy import FlakyProxy
from tests.support.stack import ROOT, Stack, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
BUNDLES_DURING_OUTAGE = 4
ANSWERS_LOST = 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("agent-live")) as s:
        yield s


def wait_for(what: str, check, timeout: float = 120, every: float = 0.3):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)
    return result


def agent(stack: Stack, server: str, spool, *args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "TRACEDOC_TOKEN": stack.token, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "agent.main", "-v", *args[:1], "--server", server,
                             "--spool", str(spool), *args[1:]], cwd=ROOT, env=env, **popen)


def traces_labelled(stack: Stack, label: str) -> list[dict]:
    found, url = [], f"/api/v1/traces/?label={label}"
    while url:
        page = stack.api("get", url.replace(stack.url, "")).json()
        found += page["results"]
        url = page.get("next")
    return found


def test_an_outage_loses_and_repeats_no_bundle(stack, tmp_path):
    proxy = FlakyProxy(stack.port)  # starts down
    run, spool, log = uuid.uuid4().hex[:12], tmp_path / "spool", tmp_path / "serve.log"
    log.write_bytes(b"")
    writing = threading.Event()
    writing.set()

    def write_lines():
        n = 0
        while writing.is_set():
            with open(log, "ab") as f:
                f.write(f"2026-01-01 00:00:{n % 60:02d},000 INFO step {n} done\n".encode())
            n += 1
            time.sleep(0.1)

    writer = threading.Thread(target=write_lines, daemon=True)
    writer.start()
    proc = agent(stack, proxy.url, spool, "run", "--logs", str(log), "--from-start", "--ship-every", "1s", "--collect-every",
                 "0.2s", "--retry-max", "1s", "--heartbeat", "1s", "--ship-timeout", "60",
                 "--labels", f"run={run}", f"host=outage-{run}", stderr=(tmp_path / "agent.err").open("wb"))
    try:
        outbox = spool / "outbox"
        wait_for("bundles spooled during the outage",
                 lambda: outbox.exists() and len(list(outbox.glob("*.tar.gz"))) >= BUNDLES_DURING_OUTAGE, timeout=60)
        assert proxy.uploads == []  # nothing got through
        proxy.lose, proxy.down = ANSWERS_LOST, False
        wait_for("the backlog shipped", lambda: proxy.lose == 0 and not list(outbox.glob("*.tar.gz")), timeout=120)
        writing.clear()
        writer.join()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0, (tmp_path / "agent.err").read_text()
    finally:
        writing.clear()
        if proc.poll() is None:
            proc.kill()
        proxy.close()
    assert not list((spool / "outbox").iterdir()) and not list((spool / "rejected").iterdir())

    keys = {u.key for u in proxy.uploads}
    lost = [u.key for u in proxy.uploads if u.status is None]
    assert len(lost) == ANSWERS_LOST and "" not in keys
    for key in set(lost):  # sent again after each lost answer: the server answered with the trace it had made
        assert [u.status for u in proxy.uploads if u.key == key] == [None] * lost.count(key) + [200]
    traces = traces_labelled(stack, f"run={run}")
    assert len(traces) == len(keys) >= BUNDLES_DURING_OUTAGE + 1  # one trace per bundle, none twice

    def all_finished():
        states = [stack.api("get", f"/api/v1/traces/{t['id']}/").json()["state"] for t in traces]
        return all(s in ("done", "failed") for s in states) and states

    assert set(wait_for("the worker to diagnose every bundle", all_finished, timeout=240, every=1)) == {"done"}, \
        stack.logs()

    # every byte the program logged arrived once: the log pieces of all traces (archive members, once parsed) add up to the file
    details = [stack.api("get", f"/api/v1/traces/{t['id']}/").json() for t in traces]
    shipped = sum(a["size"] for d in details for a in d["artifacts"] if a["name"].startswith("logs/"))
    assert shipped == log.stat().st_size, [(a["name"], a["size"]) for d in details for a in d["artifacts"]]
    host = next(h for h in stack.api("get", "/api/v1/hosts/").json() if h["host"] == f"outage-{run}")
    assert host["agent"] and host["last_bundle_trace"] in {t["id"] for t in traces}


PROGRAM = """
import os, sys, time
import torch
from agent.hook import CaptureHook

hook = CaptureHook(poll_every=0.2)
x = torch.randn(64, 64)
deadline = time.monotonic() + 240
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    x = torch.tanh(x @ x / 8)
    hook.step()
    time.sleep(0.01)
"""


def test_an_on_demand_profiler_window_comes_back_as_a_trace(stack, tmp_path):
    pytest.importorskip("torch")
    host, stop = f"capture-{uuid.uuid4().hex[:8]}", tmp_path / "stop"
    program = tmp_path / "loop.py"
    program.write_text(PROGRAM)
    proc = agent(stack, stack.url, tmp_path / "spool", "wrap", "--heartbeat", "1s", "--labels", f"host={host}",
                 "--", sys.executable, str(program), str(stop),
                 stdout=subprocess.DEVNULL, stderr=(tmp_path / "agent.err").open("wb"))
    try:
        wait_for("the host's first heartbeat",
                 lambda: any(h["host"] == host and h["agent"] for h in stack.api("get", "/api/v1/hosts/").json()))
        asked = stack.api("post", "/api/v1/captures/", json={"host": host, "kind": "profiler", "steps": 5})
        assert asked.status_code == 201, asked.text
        rid = asked.json()["id"]

        def capture_finished():
            body = stack.api("get", f"/api/v1/captures/{rid}/").json()
            return body if body["state"] in ("done", "failed") else None

        capture = wait_for("the capture's trace", capture_finished, timeout=120)
        assert capture["state"] == "done", (capture, (tmp_path / "agent.err").read_text())
        trace = wait_for("the worker", lambda: (t := stack.api("get", f"/api/v1/traces/{capture['trace']}/").json())
                         ["state"] in ("done", "failed") and t, timeout=180, every=1)
        assert trace["state"] == "done", (trace["error"], stack.logs())
        assert trace["labels"]["capture_request"] == str(rid) and trace["labels"]["capture_kind"] == "profiler"
        assert "kineto" in {a["format"] for a in trace["artifacts"]}
        stop.write_text("")
        assert proc.wait(timeout=120) == 0, (tmp_path / "agent.err").read_text()
    finally:
        stop.write_text("")
        if proc.poll() is None:
            proc.kill()
    wrapped = traces_labelled(stack, f"host={host}")
    final = [t for t in wrapped if t["labels"].get("capture") == "wrap"]
    assert len(final) == 1 and final[0]["labels"]["exit_code"] == "0" and "signal" not in final[0]["labels"]
