"""End to end on the real stack (gunicorn and a Celery worker as subprocesses, PostgreSQL and
Redis; a local HTTP receiver): ten uploads within a minute, each a new cluster (a failure no
rule explains, a different one each), reach the on-call webhook as ONE grouped notification
once the destination's group wait is over -- the worker honours the wait -- and its links open
on the port the app is served from (TRACEDOC_BASE_URL set from it, as `make run` does)."""
import time

import pytest

from tests.alerts.conftest import SECRET, alert_stack
from tests.alerts.receiver import Receiver

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
GROUP_WAIT_S = 30


def failing_log(word: str) -> bytes:
    return (f"2026-12-06 06:00:00,000 INFO train.py:10 step 1\n"
            f"2026-12-06 06:00:00,500 ERROR train.py:42 the {word} data loader gave up\n").encode()


@pytest.fixture
def stack(tmp_path):
    with alert_stack(tmp_path) as s:
        yield s


def test_ten_new_clusters_within_a_minute_are_one_notification(stack):
    with Receiver() as receiver:
        hook = stack.api("post", "/api/v1/destinations/", json={
            "team": "infra", "name": "on-call", "kind": "webhook", "url": f"{receiver.url}/hook", "secret": SECRET,
            "group_wait_s": GROUP_WAIT_S, "repeat_interval_s": 600})
        assert hook.status_code == 201, hook.text
        rule = stack.api("post", "/api/v1/alert-rules/", json={
            "team": "infra", "name": "new failures", "trigger": "new", "min_severity": "warning",
            "destinations": [hook.json()["id"]]})
        assert rule.status_code == 201, rule.text
        started = time.monotonic()
        for word in WORDS:
            trace = stack.upload([(f"{word}.log", failing_log(word))], wait=60, name=f"run {word}")
            assert trace["state"] == "done", (trace["error"], stack.logs())
        assert time.monotonic() - started < 60, "the uploads took longer than a minute"
        deadline = started + GROUP_WAIT_S + 90
        while not receiver.on("/hook") and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # a second notification, were there one, would come now
        notes = receiver.on("/hook")
        assert len(notes) == 1, ([n.json.get("summary") for n in notes], stack.logs())
        body = notes[0].json
        assert (body["event"], body["count"]) == ("cluster.digest", 10), body
        assert len({a["fingerprint"] for a in body["alerts"]}) == 10
        links = [body["cluster_url"]] + [a[k] for a in body["alerts"] for k in ("cluster_url", "trace_url")]
        assert all(link.startswith(stack.url + "/") for link in links), links
        deliveries = [d for a in stack.api("get", "/api/v1/alerts/").json()["results"] for d in a["deliveries"]]
        assert len(deliveries) == 10 and {d["state"] for d in deliveries} == {"sent"}
