from contextlib import contextmanager

import pytest

from alerts.models import AlertRule, Destination
from tests.alerts.receiver import Receiver
from tests.support.stack import Stack, postgres_database, reachable, stack_env
from tests.support.fixtures import *  # noqa: F401,F403  (the service tests' fixtures)
from tracedoc.celery import app

SECRET = "whsec-test-0123456789"


@pytest.fixture
def receiver(settings):
    """A local HTTP receiver, on loopback: allowed as a destination by the SSRF allow-list."""
    settings.TRACEDOC_ALERT_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    with Receiver() as r:
        yield r


@pytest.fixture
def eager(settings):
    """Celery tasks run in the calling process, retries included (no broker, no worker)."""
    settings.TRACEDOC_ALERT_RETRY_BACKOFF_S = 0
    settings.TRACEDOC_BASE_URL = "https://tracedoc.example"
    saved = app.conf.task_always_eager
    app.conf.update(CELERY_TASK_ALWAYS_EAGER=True)  # the Django-namespaced key the settings use
    yield
    app.conf.update(CELERY_TASK_ALWAYS_EAGER=saved)


@pytest.fixture
def destinations(infra, receiver):
    """One destination of each kind, the web ones pointing at the receiver."""
    kinds = {
        "webhook": {"url": f"{receiver.url}/hook", "secret": SECRET},
        "slack": {"url": f"{receiver.url}/slack"},
        "alertmanager": {"url": receiver.url},
        "pagerduty": {"url": f"{receiver.url}/pd", "secret": "R0UTINGKEY"},
        "email": {"emails": "oncall@example.com, sre@example.com"},
    }
    return {kind: Destination.objects.create(team=infra, name=f"{kind} dest", kind=kind, **fields)
            for kind, fields in kinds.items()}


def rule(team, trigger: str, destinations, **fields) -> AlertRule:
    r = AlertRule.objects.create(team=team, name=f"{trigger} rule", trigger=trigger, **fields)
    r.destinations.set(destinations)
    return r


def invalid(response) -> dict[str, str]:
    """A 400 problem document's invalid parameters: name -> reason."""
    return {p["name"]: p["reason"] for p in response.json()["invalid_params"]}


@contextmanager
def alert_stack(tmp_path, **env: str):
    """The real stack (gunicorn and a worker, PostgreSQL and Redis) whose alert links start with
    the address it is served at (TRACEDOC_BASE_URL, as `make run` sets it) and whose destinations
    may point at a local receiver; `env` adds settings. Skips without PostgreSQL or Redis."""
    if not (reachable(5432) and reachable(6379)):
        pytest.skip("PostgreSQL (5432) and Redis (6379) are not running: scripts/ensure-services.sh starts them")
    with postgres_database() as database_url:
        s = Stack(tmp_path, stack_env(tmp_path, database_url, "redis://127.0.0.1:6379/0"))
        s.env.update(TRACEDOC_BASE_URL=s.url, TRACEDOC_ALERT_ALLOWED_NETWORKS="127.0.0.1/32", **env)
        s.start()
        try:
            yield s
        finally:
            s.stop()
