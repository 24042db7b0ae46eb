"""The rule editor's trials (diagnosis.rule_trial_runs) in tests: a POST answers with a trial
that polls; the trial runs where the diagnose queue's messages go. `trials`: they go to the
real Redis, on this test's diagnose queue, and the test runs them in its own process as the
worker would; `trial_worker`: a real Celery worker subprocess on the real Redis, reading only
the diagnose queue, runs them."""
from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass

import pytest
from django.conf import settings

from tests.support.fixtures import REDIS_URL, QueuedTasks, fresh_connections
from tests.support.stack import ROOT, reachable, start_worker, stop, wait_until_ready

TASK = "diagnosis.run_rule_trial"
STATE = re.compile(r'<div class="rule-trial" data-trial="([0-9a-f-]{36})" data-state="(\w+)"')


def trial_of(html: str) -> tuple[str, str]:
    """(id, state) of the trial a partial shows."""
    found = STATE.search(html)
    assert found, html[:2000]
    return found.group(1), found.group(2)


def _route_by_role(queue: str) -> dict:
    """Publish as deployed: each app's tasks on `<queue>.<role>` (tracedoc.celery.route_by_role)."""
    from tracedoc.celery import app
    saved = {"CELERY_BROKER_URL": app.conf.broker_url, "CELERY_TASK_DEFAULT_QUEUE": app.conf.task_default_queue,
             "CELERY_TASK_ROUTES": app.conf.task_routes}
    app.conf.update(CELERY_BROKER_URL=REDIS_URL, CELERY_TASK_DEFAULT_QUEUE=queue,
                    CELERY_TASK_ROUTES=("tracedoc.celery.route_by_role",))
    _new_router()
    return saved


def _new_router() -> None:
    from tracedoc.celery import app
    app.amqp.flush_routes()
    app.amqp.router = app.amqp.Router()
    fresh_connections()


def _restore(saved: dict, queue: str) -> None:
    """The settings before `_route_by_role`; this test's queues dropped from Redis."""
    import redis

    from tracedoc.celery import app
    names = [queue, *(f"{queue}.{role}" for role in ("parse", "diagnose", "notify"))]
    redis.Redis.from_url(REDIS_URL).delete(*names, *(f"_kombu.binding.{n}" for n in names))
    app.conf.update(saved)
    _new_router()


@dataclass
class Trials:
    queue: str  # the diagnose queue the trials are sent to

    def take(self) -> list[tuple]:
        """The arguments of the trials queued on the diagnose queue since the last look."""
        probe = QueuedTasks(self.queue)
        taken = probe.take()
        assert set(probe.names) <= {TASK}, probe.names  # the diagnose queue holds only trials here
        return taken

    def run_queued(self) -> int:
        """Run the queued trials here, as a worker would; how many there were."""
        from diagnosis.rule_trial_runs import run_rule_trial
        queued = self.take()
        for args in queued:
            run_rule_trial(*args)
        return len(queued)

    def run(self, client, url: str, data: dict) -> str:
        """POST the editor's form: the answer is a queued trial that polls; run it, then the
        trial as the next poll reads it (done or failed)."""
        answer = client.post(url, data)
        assert answer.status_code == 200, answer.content[:2000]
        trial, state = trial_of(answer.content.decode())
        assert state == "queued" and 'hx-trigger="every 1s"' in answer.content.decode()
        assert self.run_queued() == 1
        return poll(client, trial).content.decode()

    def run_api(self, api, url: str, data: dict) -> dict:
        """POST a rules API run: 202 with the queued trial and its Location; run it, then the
        trial as a client's next GET reads it (done or failed)."""
        answer = api.post(url, data, format="json")
        assert answer.status_code == 202, answer.content[:2000]
        queued = answer.json()
        assert queued["state"] == "queued" and queued["result"] is None and answer["Location"] == queued["url"]
        assert self.run_queued() == 1
        return api.get(queued["url"]).json()


def poll(client, trial: str):
    return client.get(f"/rules/trials/{trial}/")


@pytest.fixture
def trials(no_worker):
    """Trials queued on the real Redis, on this test's own diagnose queue (routed by role)."""
    queue = no_worker.queue
    saved = _route_by_role(queue)
    yield Trials(f"{queue}.diagnose")
    _restore(saved, queue)


@pytest.fixture
def trial_worker(live_server, no_worker, storage, tmp_path):
    """A real Celery worker on the real Redis that reads only the diagnose queue of this test's
    own queues, on the test's database (a SQLite file) and artifact store; the tasks this process
    sends are routed by role to those queues. Yields the worker's log."""
    if not reachable(6379):
        pytest.skip("Redis (6379) is not running: scripts/ensure-services.sh starts it")
    queue = f"trials-{uuid.uuid4().hex[:8]}"
    saved = _route_by_role(queue)
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{settings.DATABASES['default']['NAME']}",
           "CELERY_BROKER_URL": REDIS_URL, "TRACEDOC_QUEUE": queue, "TRACEDOC_STORAGE": str(storage),
           "TRACEDOC_VAR": str(tmp_path / "var"), "PYTHONPATH": str(ROOT)}
    log = tmp_path / "trial-worker.log"
    proc = start_worker(env, log, queues=f"{queue}.diagnose")
    try:
        wait_until_ready(proc, log)
        yield log
    finally:
        stop(proc)
        _restore(saved, queue)


def poll_until_finished(client, trial: str, log=None, timeout: float = 120) -> tuple[list[str], str]:
    """Poll the trial as the editor does (every second, here faster) until it is done or
    failed: the states seen, in order without repeats, and the last partial."""
    deadline, states = time.monotonic() + timeout, []
    while True:
        answer = poll(client, trial)
        assert answer.status_code == 200, answer.content[:2000]
        html = answer.content.decode()
        state = trial_of(html)[1]
        if not states or states[-1] != state:
            states.append(state)
        if state in ("done", "failed"):
            return states, html
        assert time.monotonic() < deadline, (states, log.read_text(errors="replace")[-4000:] if log else "")
        time.sleep(0.25)
