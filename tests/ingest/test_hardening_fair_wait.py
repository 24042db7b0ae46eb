"""`?wait=` is fair: a web process holds at most TRACEDOC_MAX_WAITING_PER_USER (1) waiting
uploads of one user and TRACEDOC_MAX_WAITING (2) in all; the others answer 202 + Location at
once, so one user's waits never hold the threads another team's reads need (in the probe, 16
waiting uploads of one user pushed other reads to 8.5-18.8 s on gunicorn's 4 threads)."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from accounts.models import ApiToken

pytestmark = pytest.mark.timeout(90)
CAP = 5


def test_one_users_waits_take_one_slot_and_other_teams_reads_stay_fast(live_server, alice, bob, charlie,
                                                                        no_worker, settings):
    settings.TRACEDOC_MAX_WAIT_SECONDS = CAP
    assert settings.TRACEDOC_MAX_WAITING_PER_USER == 1 and settings.TRACEDOC_MAX_WAITING == 2

    def headers(user) -> dict:
        return {"Authorization": f"Token {ApiToken.issue(user)[1]}"}

    def upload(auth: dict) -> tuple[int, float]:
        start = time.monotonic()  # no worker reads this test's queue: no trace is ever done
        answer = requests.post(f"{live_server.url}/api/v1/traces/?wait=300", headers=auth, timeout=60,
                               files=[("files", ("errors.log", b"x"))])
        assert answer.headers["Location"] and int(answer.headers["Retry-After"]) > 0
        return answer.status_code, time.monotonic() - start

    def read(auth: dict) -> float:
        start = time.monotonic()
        answer = requests.get(f"{live_server.url}/api/v1/traces/", headers=auth, timeout=60)
        assert answer.status_code == 200
        return time.monotonic() - start

    alice_h, bob_h, charlie_h = headers(alice), headers(bob), headers(charlie)
    with ThreadPoolExecutor(10) as pool:
        alices = [pool.submit(upload, alice_h) for _ in range(6)]
        time.sleep(1.0)
        bobs = pool.submit(upload, bob_h)  # another user: the second slot of the process is his
        time.sleep(0.5)
        reads = []
        while len(reads) < 10:
            reads.append(read(charlie_h))
            time.sleep(0.2)
        alice_answers = [f.result() for f in alices]
        bob_answer = bobs.result()

    assert all(status == 202 for status, _ in alice_answers + [bob_answer])
    waited = sorted(seconds for _, seconds in alice_answers)
    assert CAP - 0.5 <= waited[-1] < CAP + 3, waited   # one of alice's uploads waited the cap ...
    assert waited[-2] < CAP - 1.5, waited             # ... the other five answered at once
    assert CAP - 0.5 <= bob_answer[1] < CAP + 3, bob_answer
    assert max(reads) < 1.0, reads
