"""`?wait=` holds a web thread at most TRACEDOC_MAX_WAIT_SECONDS (10 s): a `?wait=300` upload
answers 202 + `Location` + `Retry-After` within the cap, and a list request made meanwhile is
served at once (the live server is threaded, as gunicorn's gthread workers are)."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.conf import settings

from accounts.models import ApiToken

pytestmark = pytest.mark.timeout(60)


def test_a_long_wait_is_cut_to_the_cap_while_other_requests_are_served(live_server, alice, no_worker):
    cap = settings.TRACEDOC_MAX_WAIT_SECONDS
    assert cap <= 10
    headers = {"Authorization": f"Token {ApiToken.issue(alice)[1]}"}

    def upload() -> tuple[requests.Response, float]:
        start = time.monotonic()  # no worker reads this test's queue: the trace is never done
        answer = requests.post(f"{live_server.url}/api/v1/traces/?wait=300", headers=headers, timeout=60,
                               files=[("files", ("errors.log", b"x"))])
        return answer, time.monotonic() - start

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(upload)
        time.sleep(1.0)  # the upload is in its wait now
        start = time.monotonic()
        listed = requests.get(f"{live_server.url}/api/v1/traces/", headers=headers, timeout=60)
        list_seconds = time.monotonic() - start
        assert not waiting.done(), "the upload should still be waiting"
        answer, seconds = waiting.result()

    assert listed.status_code == 200 and list_seconds < 2.0, list_seconds
    assert listed.json()["count"] == 1  # the waiting upload's trace, already stored
    assert answer.status_code == 202, answer.text
    assert cap - 0.5 <= seconds < cap + 3.0, seconds
    assert answer.headers["Location"].endswith(f"/api/v1/traces/{answer.json()['id']}/")
    assert int(answer.headers["Retry-After"]) > 0
