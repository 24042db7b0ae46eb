"""End to end on the real stack (gunicorn, a Celery worker and Celery beat as subprocesses,
PostgreSQL and Redis; a local HTTP receiver): an agent beats through the API, then goes quiet;
the beat job finds it stale after a minute and the on-call webhook gets ONE alert naming the
host, linking to its page on the port the app is served from; the agent beats again and the
webhook gets the recovery notice."""
import subprocess
import time

import pytest

from tests.alerts.conftest import SECRET, alert_stack
from tests.alerts.receiver import Receiver
from tests.support.stack import BIN, ROOT, stop

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
CHECK_S = 2
STALE_AFTER_S = 60  # hosts.models.MIN_STALE_AFTER_S: the least time a host is given


def start_beat(stack) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "celery"), "-A", "tracedoc", "beat", "--loglevel=INFO",
                             "-s", str(stack.tmp / "beat-schedule")],
                            cwd=ROOT, env=stack.env, stdout=(stack.tmp / "beat.log").open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(receiver, path: str, count: int, timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while len(receiver.on(path)) < count and time.monotonic() < deadline:
        time.sleep(0.5)
    return receiver.on(path)


@pytest.fixture
def stack(tmp_path):
    with alert_stack(tmp_path, TRACEDOC_AGENT_CHECK_S=str(CHECK_S)) as s:
        yield s


def test_an_agent_gone_quiet_pages_once_and_its_return_is_told(stack):
    with Receiver() as receiver:
        hook = stack.api("post", "/api/v1/destinations/", json={
            "team": "infra", "name": "on-call", "kind": "webhook", "url": f"{receiver.url}/hook", "secret": SECRET,
            "group_wait_s": 0, "repeat_interval_s": 0})
        assert hook.status_code == 201, hook.text
        rule = stack.api("post", "/api/v1/alert-rules/", json={
            "team": "infra", "name": "agents", "trigger": "agent_stale", "destinations": [hook.json()["id"]]})
        assert rule.status_code == 201, rule.text
        beat = stack.api("post", "/api/v1/hosts/heartbeat/", json={"host": "gpu-node-07", "interval": 1,
                                                                    "agent_version": "1.4.0"})
        assert beat.status_code == 200, beat.text
        quiet_since = time.monotonic()
        stack.procs.append(start_beat(stack))
        try:
            notes = wait_for(receiver, "/hook", 1, STALE_AFTER_S + 60)
            took = time.monotonic() - quiet_since
            assert len(notes) == 1, stack.logs() + (stack.tmp / "beat.log").read_text(errors="replace")[-2000:]
            assert STALE_AFTER_S <= took < STALE_AFTER_S + 30, took
            time.sleep(3 * CHECK_S)  # a second alert, were there one, would come now
            assert len(receiver.on("/hook")) == 1
            body = notes[0].json
            assert body["event"] == "agent.stale" and body["hosts"] == ["gpu-node-07"]
            assert body["summary"].startswith("[warning] Stale agent: Agent on gpu-node-07 stopped sending heartbeats")
            host_id = stack.api("get", "/api/v1/hosts/").json()
            host_id = next(h["id"] for h in (host_id["results"] if isinstance(host_id, dict) else host_id)
                           if h["host"] == "gpu-node-07")
            assert body["cluster_url"].startswith(stack.url + "/hosts/")

            assert stack.api("post", "/api/v1/hosts/heartbeat/", json={"host": "gpu-node-07", "interval": 1}
                             ).status_code == 200
            notes = wait_for(receiver, "/hook", 2, 10 * CHECK_S + 10)
            assert len(notes) == 2, stack.logs()
            back = notes[1].json
            assert back["event"] == "agent.recovered" and back["severity"] == "info"
            assert back["cluster_url"] == f"{stack.url}/hosts/{host_id}/"
            alerts = stack.api("get", "/api/v1/alerts/").json()["results"]
            assert sorted(a["trigger"] for a in alerts) == ["agent_recovered", "agent_stale"]
            assert all(d["state"] == "sent" for a in alerts for d in a["deliveries"])
        finally:
            stop(stack.procs.pop())
