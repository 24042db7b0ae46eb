"""Several reconcilers at once on the real PostgreSQL (processes of their own, started at the
same instant): a trace whose task was lost is re-queued by exactly one of them, and its
report is made once."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.support.stack import ROOT, running_stack, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

LOG = b"".join(b"2024-11-29 08:19:30,038 INFO worker.py:120 request %d finished in 35.2 ms\n" % i
               for i in range(2000))

# Start at the same instant, then one reconcile pass; print what it re-queued.
RECONCILE = """
import time
from tracedoc.workflow import reconcile_traces
time.sleep(max(0.0, {at} - time.time()))
print("REQUEUED", list(reconcile_traces(stale_s=600).requeued))
"""

# The trace's parse task was lost: back in `parsing` under an old run, no heartbeat for an hour.
LOSE_TASK = """
from datetime import timedelta
from django.utils import timezone
from ingest.models import Trace
t = Trace.objects.get(pk={pk})
t.transition(Trace.State.PARSING, run_id="lost-run")
Trace.objects.filter(pk={pk}).update(updated_at=timezone.now() - timedelta(hours=1))
"""


def shell(stack, code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=stack.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_four_reconcilers_at_once_requeue_a_lost_trace_once(tmp_path):
    with running_stack(tmp_path) as stack:
        trace_id = stack.upload([("serving.log", LOG)])["id"]
        wait_for(stack, trace_id, lambda t: t["state"] == "done")
        lose = shell(stack, LOSE_TASK.format(pk=trace_id))
        assert lose.wait(120) == 0, lose.stderr.read()
        at = time.time() + 8  # every process has imported Django by then
        passes = [shell(stack, RECONCILE.format(at=at)) for _ in range(4)]
        outputs = [p.communicate(timeout=120) for p in passes]
        assert all(p.returncode == 0 for p in passes), [err for _, err in outputs]
        requeued = [json.loads(next(line for line in out.splitlines() if line.startswith("REQUEUED"))[9:])
                    for out, _ in outputs]
        assert sorted(len(r) for r in requeued) == [0, 0, 0, 1] and [trace_id] in requeued
        trace = wait_for(stack, trace_id, lambda t: t["state"] in ("done", "failed") and
                         [h["state"] for h in t["state_history"]].count("done") == 2)
        states = [h["state"] for h in trace["state_history"]]
        # the lost run, then exactly one new run: parsing again once, diagnosed once more
        assert states == ["received", "parsing", "parsed", "diagnosing", "done",
                          "parsing", "parsing", "parsed", "diagnosing", "done"]
