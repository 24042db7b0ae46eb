"""Personas (healthchecks style): alice owns team `infra`, bob is her team mate, charlie
is in another team (`other`), so every test can check cross-team denial."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import ApiToken, Team

from tests.support.stack import ROOT, start_worker, stop, wait_until_ready

CHROMIUM = Path("/usr/bin/chromium")  # Debian's; never a downloaded browser
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = ROOT / "test-artifacts" / "browser"


@pytest.fixture(autouse=True)
def storage(settings, tmp_path):
    """Every test gets its own artifact store."""
    settings.TRACEDOC_STORAGE = tmp_path / "storage"
    return settings.TRACEDOC_STORAGE


@pytest.fixture
def infra(db):
    return Team.objects.create(name="Infra", slug="infra")


@pytest.fixture
def other(db):
    return Team.objects.create(name="Other", slug="other")


def _member(username: str, team: Team) -> User:
    user = User.objects.create_user(username, password=f"{username}-pw-123")
    team.members.add(user)
    return user


@pytest.fixture
def alice(infra):
    return _member("alice", infra)


@pytest.fixture
def bob(infra):
    return _member("bob", infra)


@pytest.fixture
def charlie(other):
    return _member("charlie", other)


def token_client(user: User) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
    return client


@pytest.fixture
def alice_api(alice):
    return token_client(alice)


@pytest.fixture
def charlie_api(charlie):
    return token_client(charlie)


REDIS_URL = os.environ.get("TRACEDOC_TEST_REDIS", "redis://127.0.0.1:6379/0")


def fresh_connections() -> None:
    """Drop pooled broker connections so the next publish connects to the configured URL."""
    from kombu import pools

    from tracedoc.celery import app
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    app.amqp._producer_pool = None
    pools.reset()  # kombu's process-wide producer/connection pools, keyed by the old broker


class QueuedTasks:
    """What the code under test sent to the real broker, read back from the queue."""

    def __init__(self, queue: str):
        self.queue, self.seen, self.names = queue, [], []  # names: the tasks' (diagnosis.diagnose_trace, ...)

    def ids(self) -> list[int]:
        """The first argument (a trace id) of every task queued so far, in order."""
        self.take()
        return list(self.seen)

    def take(self) -> list[tuple]:
        """The arguments of the tasks queued since the last look, taken off the queue."""
        from tracedoc.celery import app
        taken = []
        with app.connection_for_read() as conn:
            q = conn.SimpleQueue(self.queue)
            while True:
                try:
                    message = q.get(timeout=0.2)
                except q.Empty:
                    break
                args, _kwargs, _embed = message.decode()
                taken.append(tuple(args))
                self.seen.append(args[0])
                self.names.append(message.headers.get("task"))
                message.ack()
            q.close()
        return taken


@pytest.fixture
def no_worker():
    """Tasks go to the real Redis broker, on a queue of this test's own that no worker reads;
    the test reads back what was queued (`.ids()`)."""
    from tracedoc.celery import app
    queue = f"test-queue-{uuid.uuid4().hex[:12]}"
    saved = {"CELERY_BROKER_URL": app.conf.broker_url, "CELERY_TASK_DEFAULT_QUEUE": app.conf.task_default_queue,
             "CELERY_TASK_ROUTES": app.conf.task_routes}
    # no routes: every task (parse, diagnose, notify) lands on this one queue
    app.conf.update(CELERY_BROKER_URL=REDIS_URL, CELERY_TASK_DEFAULT_QUEUE=queue, CELERY_TASK_ROUTES={})
    app.amqp.flush_routes()
    app.amqp.router = app.amqp.Router()
    fresh_connections()
    probe = QueuedTasks(queue)
    yield probe
    probe.ids()  # drain, then drop the queue's keys: leave nothing behind in Redis
    import redis
    redis.Redis.from_url(REDIS_URL).delete(queue, f"_kombu.binding.{queue}")
    app.conf.update(saved)
    app.amqp.flush_routes()
    app.amqp.router = app.amqp.Router()
    fresh_connections()


def log_in(page, url: str) -> None:
    """Open `url` in the browser and log in as alice on the login page it redirects to."""
    page.goto(url)
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw-123")
    page.click("button[type=submit]")


@pytest.fixture
def browser():
    """Headless Chromium driven by Playwright (browser tests skip without it)."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (scripts/ensure-chromium.sh)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def worker(live_server, tmp_path, storage):
    """A worker on this test's database (a SQLite file) and a broker of its own."""
    from tracedoc.celery import app
    broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"
    queue = f"browser-{uuid.uuid4().hex[:8]}"
    saved = {"CELERY_BROKER_URL": app.conf.broker_url, "CELERY_TASK_DEFAULT_QUEUE": app.conf.task_default_queue}
    app.conf.update(CELERY_BROKER_URL=broker, CELERY_TASK_DEFAULT_QUEUE=queue)  # the names Django settings use
    fresh_connections()  # a pool of an earlier test's broker would publish there
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{settings.DATABASES['default']['NAME']}",
           "CELERY_BROKER_URL": broker, "TRACEDOC_QUEUE": queue, "TRACEDOC_STORAGE": str(storage),
           "TRACEDOC_VAR": str(tmp_path / "var"), "PYTHONPATH": str(ROOT)}
    log = tmp_path / "worker.log"
    proc = start_worker(env, log)
    wait_until_ready(proc, log)
    yield log
    stop(proc)
    app.conf.update(saved)
    fresh_connections()  # drop the producer pool bound to this test's broker
