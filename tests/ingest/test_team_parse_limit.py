"""Per-team parse slots through the real stack (two Celery workers, PostgreSQL, Redis):
with TRACEDOC_TEAM_MAX_PARSING=1 a team's second trace waits in `received` (saying why)
until its first is parsed, while another team's trace parses meanwhile on the free worker."""
from __future__ import annotations

import time
from datetime import datetime

import pytest
import requests

from tests.support.stack import add_workers, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

LINE = "2024-11-29 08:19:30,038 INFO worker.py:120 request {i} finished in 35.2 ms tokens=128\n"
SLOW_LOG = "".join(LINE.format(i=i) for i in range(120_000)).encode()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("team-limit"), TRACEDOC_TEAM_MAX_PARSING="1",
                       TRACEDOC_FANOUT_BYTES="0") as s:
        add_workers(s, 1)
        yield s


def entered(trace: dict, state: str) -> datetime:
    return datetime.fromisoformat(next(h["at"] for h in trace["state_history"] if h["state"] == state))


def test_a_teams_second_trace_waits_for_its_slot_another_team_does_not(stack):
    other_token = stack.manage("createtoken", "ci-other", "--team", "other").splitlines()[-1]
    first = stack.upload([("a1.log", SLOW_LOG)], wait=0)["id"]
    second = stack.upload([("a2.log", SLOW_LOG)], wait=0)["id"]
    response = requests.post(f"{stack.url}/api/v1/traces/", headers={"Authorization": f"Token {other_token}"},
                             files=[("files", ("b.log", SLOW_LOG))], timeout=120)
    assert response.status_code in (201, 202), response.text
    other = response.json()["id"]

    seen_waiting, both_parsing, deadline = False, False, time.monotonic() + 600
    while True:
        a1, a2 = (stack.api("get", f"/api/v1/traces/{t}/").json() for t in (first, second))
        both_parsing |= a1["state"] == a2["state"] == "parsing"
        seen_waiting |= a2["state"] == "received" and "waiting for a parse slot" in a2["error"]
        if a1["state"] in ("done", "failed") and a2["state"] in ("done", "failed"):
            break
        assert time.monotonic() < deadline, (a1["state"], a2["state"], stack.logs())
        time.sleep(0.1)
    b = requests.get(f"{stack.url}/api/v1/traces/{other}/", headers={"Authorization": f"Token {other_token}"},
                     timeout=30).json()
    assert (a1["state"], a2["state"]) == ("done", "done"), (a1["error"], a2["error"], stack.logs())
    assert seen_waiting and not both_parsing
    assert entered(a2, "parsing") >= entered(a1, "parsed")  # started once the first freed the slot
    assert a2["error"] == ""                                  # the note went once it was sent
    # the other team's trace parsed while the first team's first trace did
    deadline = time.monotonic() + 300
    while b["state"] not in ("done", "failed"):
        assert time.monotonic() < deadline, stack.logs()
        time.sleep(0.2)
        b = requests.get(f"{stack.url}/api/v1/traces/{other}/", headers={"Authorization": f"Token {other_token}"},
                         timeout=30).json()
    assert b["state"] == "done"
    assert entered(b, "parsing") < entered(a1, "parsed")
